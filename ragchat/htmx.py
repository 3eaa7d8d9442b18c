"""htmx and the server's answers: where a form's POST sends the browser, the page a request came
from, a refusal said in the page's message area, and the sign-in redirect of an htmx request.

htmx follows a redirect inside its swap and swaps no refused (4xx/5xx) response, so each of these
answers an htmx request in htmx's own terms (HX-Redirect, HX-Retarget; static/js/refusals.js lets
a retargeted refusal be swapped)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget


def redirect_after_post(request, url: str) -> HttpResponse:
    """A form's POST redirects; for htmx, htmx's own redirect (HX-Redirect), so the page loads as a form's would."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def current_page(request) -> str | None:
    """The path (and query) of this site's page the request was sent from: an htmx request's
    HX-Current-URL (django-htmx), a form's Referer. None for another site's address, or a path this
    site's host would send elsewhere ("//other.example/"): no place to link to or to sign in back to."""
    if getattr(request, "htmx", None):
        path = request.htmx.current_url_abs_path
    else:
        referer = request.headers.get("Referer", "")
        same_site = url_has_allowed_host_and_scheme(referer, {request.get_host()}, require_https=request.is_secure())
        path = urlunsplit(urlsplit(referer)._replace(scheme="", netloc="")) if referer and same_site else None
    if path and path.startswith("/") and url_has_allowed_host_and_scheme(path, allowed_hosts=None):
        return path
    return None


def refuse_in_flash(
    request, message: str, *, level: int = messages.INFO, also: str = "", status: int = 409
) -> HttpResponse:
    """An htmx action the server refuses, with the sentence saying why: in the page's message area
    (#flash of _base.html, as the messages of a page load are; 409, or `status`), where a refusal
    would otherwise show nothing. `also`: out-of-band fragments (hx-swap-oob) to swap with it, e.g.
    the item as it is now."""
    messages.add_message(request, level, message)
    response = render(request, "_refusal.html", {"also": also}, status=status)
    return reswap(retarget(response, "#flash"), "innerHTML")


def sign_in_redirect(request) -> HttpResponse:
    """The sign-in redirect of an action sent after the session ended (it expired, or was signed out
    in another tab): it leads back to the page the person was on, not to the action's own address
    (a form's POST-only address would answer the return with 405), and for htmx it is a full page
    load of the sign-in page (HX-Redirect), not a swap."""
    page = current_page(request)
    return redirect_after_post(request, redirect_to_login(page).url if page else resolve_url(settings.LOGIN_URL))


def is_sign_in_redirect(response) -> bool:
    """A redirect to the sign-in page (login_required's, for someone not signed in)."""
    return response.status_code in (301, 302) and response["Location"].split("?")[0] == resolve_url(settings.LOGIN_URL)
