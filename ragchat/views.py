from django.http import JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_htmx.http import reswap, retarget

from access import policy
from ragchat.health import health_report
from ragchat.htmx import current_page


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


def csrf_failure(request, reason: str = ""):
    """A request refused for its CSRF token (a page left open across a new sign-in, or too long).
    A form gets the product's "The form expired" page (403_csrf.html), whose button opens the page the
    form was on again (a fresh page, a new token; the browser's Reload would send the same form). An
    htmx request would show nothing (htmx swaps only successful responses): it gets the same sentence
    in the page's message area (#flash, _base.html; static/js/refusals.js lets htmx swap it), with a
    link that reloads the page, whose new token makes the next try work. The reason goes to the log
    (django.security.csrf), not to the person."""
    if not getattr(request, "htmx", False):
        return render(request, "403_csrf.html", {"form_page_url": current_page(request)}, status=403)
    reload_url = current_page(request) or reverse("home")
    response = render(request, "_form_expired_flash.html", {"reload_url": reload_url}, status=403)
    return reswap(retarget(response, "#flash"), "innerHTML")
