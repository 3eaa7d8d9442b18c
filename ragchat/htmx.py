"""Where a form's POST sends the browser: a redirect, or for an htmx request (which would follow a
302 inside its swap) htmx's own redirect (HX-Redirect), so the page loads as a form's would."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect
from django_htmx.http import HttpResponseClientRedirect


def redirect_after_post(request, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
