from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from api.endpoints import api
from chat import views as chat_views
from ragchat import views

urlpatterns = [
    path("", chat_views.chat_home, name="home"),
    path("chat/", include("chat.urls")),
    path("health", views.health, name="health"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("documents/", include("documents.urls")),
    path("routing/", include("routing.urls")),
    path("access/", include("access.urls")),
    path("api/v1/", api.urls),
    path("api/tokens/", include("api.urls")),
    path("admin/", admin.site.urls),
]
