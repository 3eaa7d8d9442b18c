import uuid

from django.contrib import messages
from django.shortcuts import render
from django.urls import reverse

from ragchat.htmx import is_sign_in_redirect, refuse_in_flash, sign_in_redirect
from ragchat.services.logs import request_id_var

NULL_CHARACTER_REFUSAL = (
    "Something you sent contains a null character (a zero byte), which cannot be stored or searched"
    " for, so nothing was changed."
)


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


def refuses_null_characters(view):
    """Marks a view that answers a null character in what it reads itself, keeping what was typed
    (NullCharacterMiddleware leaves it to the view)."""
    view.refuses_null_characters = True
    return view


def _holds_null(values) -> bool:
    return any("\x00" in name or any("\x00" in value for value in vals) for name, vals in values.lists())


class NullCharacterMiddleware:
    """A null character (\x00) in any query or form value or name of a web request is refused here
    before the view reads it: 400 with a sentence (for htmx, in the page's message area, the page
    kept as it is). PostgreSQL's text holds no NUL (a DataError, a server error, wherever a view
    stores or searches what it read from request.GET or request.POST itself: a chat's new title, a
    review note, a vote's comment, a search); Django's forms refuse it field by field, and an
    uploaded file's name loses it in Django's parser. This is the one place for every other read,
    those to come included.

    Left alone: the API (/api/v1/), which answers in its own shape (422, api.schemas.Text) and decides
    authentication before it reads a body; and views marked `refuses_null_characters`, which say
    it themselves and keep what was typed (the new chat's question: chat.services.question_problem).
    It runs after the CSRF check (process_view, placed after CsrfViewMiddleware): a forged request
    is refused as forged."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if getattr(view_func, "refuses_null_characters", False) or request.path.startswith(reverse("api:api-root")):
            return None
        if not _holds_null(request.GET) and not (request.method == "POST" and _holds_null(request.POST)):
            return None
        if getattr(request, "htmx", False):
            said = f"{NULL_CHARACTER_REFUSAL} Remove it and try again."
            return refuse_in_flash(request, said, level=messages.ERROR, status=400)
        return render(
            request, "400.html", {"reason": f"{NULL_CHARACTER_REFUSAL} Go back, remove it and try again."}, status=400
        )
