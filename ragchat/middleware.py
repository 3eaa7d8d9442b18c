import uuid

from ragchat.htmx import is_sign_in_redirect, sign_in_redirect
from ragchat.services.logs import request_id_var


class RequestIdMiddleware:
    """Gives every HTTP request an id (or keeps a sane X-Request-ID) for the JSON logs and the response."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if incoming.isascii() and 0 < len(incoming) <= 64 and incoming.isprintable() else ""
        request.request_id = request_id or f"req_{uuid.uuid4().hex[:16]}"
        token = request_id_var.set(request.request_id)
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = request.request_id
        return response


class HtmxSignInMiddleware:
    """An htmx request whose session ended (it expired, or was signed out in another tab) is sent to
    sign in by login_required like any other; htmx would follow that redirect and swap the sign-in
    page into its target, a page inside the page. For every htmx request it becomes htmx's own
    redirect: the sign-in page loads in place of the page, and leads back to it (ragchat.htmx)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.htmx and is_sign_in_redirect(response):
            return sign_in_redirect(request)
        return response
