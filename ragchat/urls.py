from django.contrib import admin
from django.urls import include, path

from access import views as access_views
from api.endpoints import api
from chat import views as chat_views
from ragchat import views

urlpatterns = [
    path("", chat_views.chat_home, name="home"),
    path("chat/", include("chat.urls")),
    path("health", views.health, name="health"),
    path("accounts/login/", access_views.SignInView.as_view(), name="login"),
    path("accounts/logout/", access_views.SignOutView.as_view(), name="logout"),
    path("documents/", include("documents.urls")),
    path("routing/", include("routing.urls")),
    path("access/", include("access.urls")),
    # Company sign-in (OpenID Connect): 404 unless configured (access.oidc).
    path(
        "oidc/",
        include(
            (
                [
                    path("authenticate/", access_views.oidc_authenticate, name="authenticate"),
                    path("callback/", access_views.oidc_callback, name="callback"),
                ],
                "oidc",
            )
        ),
    ),
    path("api/v1/", api.urls),
    path("api/tokens/", include("api.urls")),
    path("admin/", admin.site.urls),
]
