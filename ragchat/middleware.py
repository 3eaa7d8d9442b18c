import uuid

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
