from django.http import JsonResponse
from django.views.decorators.http import require_GET

from access import policy
from ragchat.health import health_report


@require_GET
async def health(request):
    """One JSON document: the status, and for admins each part (database, vector store, embedder,
    Ollama). 503 when a required part is down."""
    report = await health_report()
    status, up = report.status, report.up
    body = {"status": status, **report.parts}
    user = await request.auser()
    if not policy.is_admin(user):
        # Model names, counts and addresses are for admins; a probe only needs the verdict.
        body = {"status": status}
    return JsonResponse(body, status=200 if up else 503)
