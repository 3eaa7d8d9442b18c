from django.urls import path

from documents import site_views, viewer_views, views

app_name = "documents"

urlpatterns = [
    path("", views.document_list, name="list"),
    path("upload", views.document_upload, name="upload"),
    path("<uuid:document_id>/", views.document_detail, name="detail"),
    path("<uuid:document_id>/row", views.document_row, name="row"),
    path("<uuid:document_id>/file", views.document_download, name="download"),
    path("<uuid:document_id>/view", viewer_views.document_view, name="view"),
    path("<uuid:document_id>/pages/<id:page>.png", viewer_views.document_page, name="page"),
    path("<uuid:document_id>/retry", views.document_retry, name="retry"),
    path("<uuid:document_id>/replace", views.document_replace, name="replace"),
    path("<uuid:document_id>/delete", views.document_delete, name="delete"),
    path("<uuid:document_id>/rename", views.document_rename, name="rename"),
    path("<uuid:document_id>/outdated/clear", views.document_clear_outdated, name="clear_outdated"),
    path("sites/", site_views.site_list, name="sites"),
    path("sites/new", site_views.site_create, name="site_create"),
    path("sites/<id:site_id>/", site_views.site_detail, name="site_detail"),
    path("sites/<id:site_id>/crawl", site_views.site_crawl, name="site_crawl"),
    path("sites/<id:site_id>/delete", site_views.site_delete, name="site_delete"),
]
