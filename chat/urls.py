from django.urls import path

from chat import views

app_name = "chat"

urlpatterns = [
    path("new/", views.session_new, name="new"),
    path("search/", views.session_search, name="search"),
    path("archived/", views.session_archived, name="archived"),
    path("<uuid:session_id>/", views.session_detail, name="session"),
    path("<uuid:session_id>/rename/", views.session_rename, name="rename"),
    path("<uuid:session_id>/pin/", views.session_pin, name="pin"),
    path("<uuid:session_id>/archive/", views.session_archive, name="archive"),
    path("<uuid:session_id>/export.md", views.session_export, {"fmt": "md"}, name="export_md"),
    path("<uuid:session_id>/export.pdf", views.session_export, {"fmt": "pdf"}, name="export_pdf"),
    path("<uuid:session_id>/delete/", views.session_delete, name="delete"),
]
