from django.urls import path

from access import views

app_name = "access"

urlpatterns = [
    path("view-as/", views.view_as, name="view_as"),
    path("audit/", views.audit_log, name="audit"),
]
