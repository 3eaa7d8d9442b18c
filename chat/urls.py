from django.urls import path

from chat import views

app_name = "chat"

urlpatterns = [
    path("new/", views.session_new, name="new"),
    path("<uuid:session_id>/", views.session_detail, name="session"),
    path("<uuid:session_id>/rename/", views.session_rename, name="rename"),
    path("<uuid:session_id>/delete/", views.session_delete, name="delete"),
]
