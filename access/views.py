"""Admins' access pages: "view as" (what a person's retrieval returns, and what it does not) and
the audit log. Anyone but an admin gets a 404, as for any page that is not theirs."""

from __future__ import annotations

import csv
import json
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from access import oidc, policy, selectors
from access.forms import AuditFilterForm, ViewAsForm
from access.view_as import view_as_preview
from ragchat.services.glossary import guard_csv_cell

AUDIT_PAGE_ROWS = 500
AUDIT_CSV_ROWS = 50_000


def _admin_or_404(request) -> None:
    if not policy.is_admin(request.user):
        raise Http404("No such page.")


@login_required
@require_http_methods(["GET", "POST"])
def view_as(request):
    _admin_or_404(request)
    form = ViewAsForm(request.POST or None, admin=request.user)
    preview = subject = None
    if request.method == "POST" and form.is_valid():
        subject = form.cleaned_data["user"]
        preview = view_as_preview(
            admin=request.user, subject=subject, question=form.cleaned_data["question"], request=request
        )
    return render(request, "access/view_as.html", {"form": form, "preview": preview, "subject": subject})


@login_required
@require_GET
def audit_log(request):
    _admin_or_404(request)
    filters = AuditFilterForm({k: v for k, v in request.GET.items() if k != "format"} or None)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    events = selectors.audit_events(
        user=request.user,
        action=chosen.get("action") or None,
        person=(chosen.get("person") or "").strip(),
        since=chosen.get("since"),
        until=chosen.get("until"),
    )
    query = urlencode({k: v for k, v in request.GET.items() if k != "format" and v})
    if request.GET.get("format") == "csv" and not filters.errors:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="audit-log.csv"'
        writer = csv.writer(response)
        writer.writerow(["time", "action", "actor", "subject", "summary", "ip_address", "details"])
        for e in events[:AUDIT_CSV_ROWS]:
            writer.writerow(
                [
                    e.created_at.isoformat(),
                    e.action,
                    guard_csv_cell(e.actor_name),
                    guard_csv_cell(e.subject_name),
                    guard_csv_cell(e.summary),
                    e.ip_address or "",
                    json.dumps(e.data, ensure_ascii=False, sort_keys=True),
                ]
            )
        return response
    return render(
        request,
        "access/audit.html",
        {"filters": filters, "events": events[:AUDIT_PAGE_ROWS], "filtered": bool(query), "query": query},
    )


def locked_out(request, credentials, *args, **kwargs):
    """django-axes' lockout response: a page that says what happened and when to try again."""
    from django.conf import settings

    return render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "lockout_minutes": round(settings.AXES_COOLOFF_TIME * 60)},
        status=429,
    )


# ----------------------------------------------------------------------------------- sign-in


class SignInView(LoginView):
    """The sign-in page: the password form (unless RAGCHAT_LOCAL_PASSWORDS=false) and, when company
    sign-in is configured, a "Sign in with …" button."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(
            oidc_enabled=oidc.enabled(),
            oidc_label=oidc.label(),
            local_passwords=oidc.local_passwords(),
        )
        return context

    def post(self, request, *args, **kwargs):
        if not oidc.password_sign_in_allowed():
            messages.error(request, f"Password sign-in is turned off here: sign in with {oidc.label()}.")
            return self.render_to_response(self.get_context_data(), status=403)
        return super().post(request, *args, **kwargs)


class SignOutView(LogoutView):
    """Signing out (POST): ragchat's session ends. After a company sign-in the browser then goes to
    the provider's end_session_endpoint, which ends the provider's own session and sends it back to
    the sign-in page (access.oidc.end_session_url). Where the provider has no such endpoint (Google),
    after a password sign-in, or when the provider cannot be reached, signing out is ragchat's alone:
    the provider keeps its session, and its next "Sign in with …" may go through without a password."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get(oidc.ID_TOKEN_SESSION_KEY, "")
        unreachable = False
        try:
            provider = oidc.end_session_url(request, id_token)
        except oidc.SignInRefused:
            provider, unreachable = None, True
        response = super().post(request, *args, **kwargs)
        if unreachable:
            messages.warning(
                request,
                f"You are signed out of ragchat. {oidc.label()} could not be reached to end your sign-in"
                " there: sign out there too, or close the browser.",
            )
        return redirect(provider) if provider else response


class _OIDCRequestView(OIDCAuthenticationRequestView):
    get_settings = staticmethod(oidc.setting)


class _OIDCCallbackView(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc.setting)

    def get(self, request):
        # A response (a code, or an error and its description, shown on the sign-in page) counts
        # only for a sign-in this browser started: anyone can craft a link to this URL.
        if ("code" in request.GET or "error" in request.GET) and request.GET.get("state") not in request.session.get(
            "oidc_states", {}
        ):
            raise SuspiciousOperation("an OIDC response whose state this session did not start")
        return super().get(request)

    def login_success(self):
        response = super().login_success()
        # After auth.login (which may start a new session): signing out hints the provider with it.
        self.request.session[oidc.ID_TOKEN_SESSION_KEY] = getattr(self.request, "oidc_id_token", "")
        return response

    def login_failure(self):
        reason = getattr(self.request, "oidc_failure", "")
        if self.request.GET.get("error"):
            described = self.request.GET.get("error_description") or self.request.GET["error"]
            reason = f"{oidc.label()} did not sign you in: {described[:200]}"
            oidc.record_failure(self.request, reason)
        elif not reason:
            reason = f"The sign-in with {oidc.label()} did not complete. Please try again."
        messages.error(self.request, reason)
        return redirect("login")


def _oidc_view(view):
    def run(request):
        if not oidc.enabled():
            raise Http404("Company sign-in is not configured.")
        try:
            oidc.discovery()
        except oidc.SignInRefused as e:
            messages.error(request, str(e))
            return redirect("login")
        try:
            return view(request)
        except SuspiciousOperation:
            reason = "This sign-in response is stale or was already used. Please start again."
            oidc.record_failure(request, reason)
            messages.error(request, reason)
            return redirect("login")

    return require_GET(run)


oidc_authenticate = _oidc_view(_OIDCRequestView.as_view())
oidc_callback = _oidc_view(_OIDCCallbackView.as_view())
