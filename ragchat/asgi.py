"""ASGI entry point: HTTP through Django, websockets through channels (auth + origin checked)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragchat.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from chat import turn_handover  # noqa: E402
from documents.recovery import recover_on_first_call  # noqa: E402
from ragchat import processes, runtime  # noqa: E402
from ragchat.request_threads import request_threads  # noqa: E402
from ragchat.ws_urls import websocket_urlpatterns  # noqa: E402

# Settings that cannot run (several processes on one embedded store, ...) stop the server here.
if problems := processes.process_problems():
    raise ImproperlyConfigured("ragchat cannot start with these settings:\n- " + "\n- ".join(problems))


def _daphne_leaves_bodies_to_django() -> None:
    """Twisted, under daphne, parses a POST's form or multipart body into `request.args` (which daphne
    never reads: it hands the raw body to Django) and answers a body it cannot parse with a bare 400
    before the application sees the request: an API call without a token got 400 instead of 401. Off,
    Django alone parses the body, after authentication, and an upload is not parsed twice."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # another ASGI server
        return
    WebRequest._parsePOSTFormSubmission = property(lambda self: False, lambda self, value: None)


_daphne_leaves_bodies_to_django()

# The RAG parts are built once here, at start-up. RAGCHAT_WARMUP=1 (the default; tests set 0)
# readies the server: the model loads early (a client of the embedded store never opens the store,
# which the warm-up would) and what start-up built is set aside from the garbage collector (at the
# end of this module).
ready = os.environ.get("RAGCHAT_WARMUP", "1") == "1"
runtime.start(warm_up=ready and processes.opens_store())

# turn_handover.on_first_call: answers a dead process left streaming are closed, and the holder of the
# embedded store serves the chat turns client processes hand over (chat/turn_handover.py).
# recover_on_first_call: ingestion interrupted by a restart ends failed-and-retryable, never half
# indexed (documents/recovery.py).
application = recover_on_first_call(
    turn_handover.on_first_call(
        ProtocolTypeRouter(
            {
                "http": request_threads(django_asgi_app),  # a few threads, not one per request
                "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
            }
        )
    )
)

if ready:
    runtime.settle_heap()
