"""htmx and the server's answers: where a form's POST sends the browser, and a refusal said in the
page's message area.

htmx follows a redirect inside its swap and swaps no refused (4xx/5xx) response, so each of these
answers an htmx request in htmx's own terms (HX-Redirect, HX-Retarget; static/js/refusals.js lets
a retargeted refusal be swapped)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget


def redirect_after_post(request, url: str) -> HttpResponse:
    """A form's POST redirects; for htmx, htmx's own redirect (HX-Redirect), so the page loads as a form's would."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def refuse_in_flash(request, message: str, *, level: int = messages.INFO, also: str = "") -> HttpResponse:
    """An htmx action the server refuses, with the sentence saying why: in the page's message area
    (#flash of _base.html, as the messages of a page load are; 409), where a refusal would otherwise
    show nothing. `also`: out-of-band fragments (hx-swap-oob) to swap with it, e.g. the item as it is now."""
    messages.add_message(request, level, message)
    response = render(request, "_refusal.html", {"also": also}, status=409)
    return reswap(retarget(response, "#flash"), "innerHTML")
