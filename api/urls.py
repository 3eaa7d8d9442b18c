from django.urls import path

from api import views

app_name = "tokens"

urlpatterns = [
    path("", views.token_list, name="list"),
    path("all/", views.token_admin_list, name="admin"),
    path("<id:token_id>/revoke/", views.token_revoke, name="revoke"),
]
