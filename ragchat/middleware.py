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


class SignInReturnMiddleware:
    """An action sent after the session ended (it expired, or was signed out in another tab) is sent
    to sign in by login_required like any page, with `next` its own address. For htmx that redirect
    would be followed inside the swap (the sign-in page inside the page), and a form's POST-only
    address would answer the return with 405. So for htmx requests and for anything but GET and HEAD,
    the sign-in redirect leads back to the page the person was on (ragchat.htmx.sign_in_redirect)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (request.htmx or request.method not in ("GET", "HEAD")) and is_sign_in_redirect(response):
            return sign_in_redirect(request)
        return response
