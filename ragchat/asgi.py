"""ASGI entry point: HTTP through Django, websockets through channels (auth + origin checked)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragchat.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from documents.recovery import recover_on_first_call  # noqa: E402
from ragchat import runtime  # noqa: E402
from ragchat.ws_urls import websocket_urlpatterns  # noqa: E402

# The RAG parts are built once here, at start-up; RAGCHAT_WARMUP=0 skips loading the model early.
runtime.start(warm_up=os.environ.get("RAGCHAT_WARMUP", "1") == "1")

# recover_on_first_call: ingestion interrupted by a restart ends failed-and-retryable, never half
# indexed (documents/recovery.py).
application = recover_on_first_call(
    ProtocolTypeRouter(
        {
            "http": django_asgi_app,
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)
