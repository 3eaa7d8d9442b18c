"""Personal access token pages: a person's own tokens (create, name, scope, expiry, revoke; the
secret shown once), and the admins' list of every token of their tenant. Access: access.policy."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access import policy
from api import services
from api.forms import TokenForm


def _rows(tokens):
    now = timezone.now()
    rows = list(tokens.select_related("user", "revoked_by"))
    for t in rows:
        t.state = "revoked" if t.revoked_at else ("expired" if t.expires_at and t.expires_at <= now else "active")
    return rows


# Where a token just made waits for the page that shows its secret, once (post/redirect/get: a
# reload of that page makes nothing and no longer shows the secret). The session lives on the server.
NEW_TOKEN_KEY = "api.new_token"


def _new_token_once(request):
    """The token made by the last POST and its secret, taken out of the session: shown this once."""
    made = request.session.pop(NEW_TOKEN_KEY, None)
    if not isinstance(made, dict):
        return None
    token = policy.own_tokens(user=request.user).filter(pk=made.get("id"), revoked_at__isnull=True).first()
    return services.NewToken(token=token, secret=made["secret"]) if token and made.get("secret") else None


@login_required
@never_cache  # the page that shows a new secret must not be kept by any cache
@require_http_methods(["GET", "POST"])
def token_list(request):
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            made = services.token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_in_days=form.cleaned_data["expires_in_days"] or None,
                request=request,
            )
        except services.TokenRefused as e:
            form.add_error(None, str(e))
        else:
            request.session[NEW_TOKEN_KEY] = {"id": made.token.pk, "secret": made.secret}
            return redirect("tokens:list")
    context = {
        "form": form,
        "created": _new_token_once(request) if request.method == "GET" else None,
        "tokens": _rows(policy.own_tokens(user=request.user)),
        "is_admin": policy.is_admin(request.user),
        "api_base": request.build_absolute_uri(reverse("api:api-root")),
    }
    return render(request, "api/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_GET
def token_admin_list(request):
    if not policy.is_admin(request.user):
        raise Http404("No such page.")
    return render(request, "api/tokens_admin.html", {"tokens": _rows(policy.tenant_tokens(user=request.user))})


@login_required
@require_POST
def token_revoke(request, token_id):
    token = policy.revocable_token(user=request.user, token_id=token_id)
    if token is None:
        raise Http404("No such token.")
    services.token_revoke(token=token, by=request.user, request=request)
    messages.success(request, f"“{token.name}” is revoked: calls with it are refused from now on.")
    if token.user_id != request.user.pk or request.POST.get("next") == "admin":
        return redirect("tokens:admin")
    return redirect("tokens:list")
