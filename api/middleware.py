"""The API's error shape for what never reaches an operation: an address under /api/v1/ that is no
operation (Django's resolver 404: the HTML 404 page, or the debug page with DEBUG on) and a known
address called with a method it does not take (django-ninja's plain-text 405). The operations' own
errors are shaped by api.endpoints' exception handlers; the web pages keep their HTML error pages."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction
from django.urls import reverse
from django.utils.decorators import sync_and_async_middleware

from api.errors import error_response


def _shaped(request, response):
    if response.status_code not in (404, 405) or response.get("Content-Type", "").startswith("application/json"):
        return response
    if not request.path.startswith(reverse("api:api-root")):
        return response
    if response.status_code == 404:
        docs = reverse("api:openapi-view")
        return error_response(request, 404, "not_found", f"There is no API operation at this address: see {docs}.")
    allowed = ", ".join(sorted(m.strip() for m in response.get("Allow", "").split(",") if m.strip()))
    return error_response(
        request,
        405,
        "method_not_allowed",
        f"{request.method} is not allowed here: use {allowed}.",
        headers={"Allow": allowed},
    )


@sync_and_async_middleware
def api_error_shape(get_response):
    """Async under daphne (no thread hop for the API's async operations), sync under the test client."""
    if iscoroutinefunction(get_response):

        async def middleware(request):
            return _shaped(request, await get_response(request))

    else:

        def middleware(request):
            return _shaped(request, get_response(request))

    return middleware
