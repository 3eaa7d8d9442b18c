"""Admins' access pages: "view as" (what a person's retrieval returns, and what it does not) and
the audit log. Anyone but an admin gets a 404, as for any page that is not theirs."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods

from access import policy, selectors
from access.forms import AuditFilterForm, ViewAsForm
from access.view_as import view_as_preview


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
    filters = AuditFilterForm(request.GET or None)
    action = filters.cleaned_data.get("action") if filters.is_valid() else None
    events = selectors.audit_events(user=request.user, action=action or None)
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="audit-log.csv"'
        writer = csv.writer(response)
        writer.writerow(["time", "action", "actor", "subject", "summary", "ip_address"])
        for e in events[:10000]:
            writer.writerow(
                [e.created_at.isoformat(), e.action, e.actor_name, e.subject_name, e.summary, e.ip_address or ""]
            )
        return response
    return render(request, "access/audit.html", {"filters": filters, "events": events[:500], "action": action or ""})


def locked_out(request, credentials, *args, **kwargs):
    """django-axes' lockout response: a page that says what happened and when to try again."""
    from django.conf import settings

    return render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "lockout_minutes": round(settings.AXES_COOLOFF_TIME * 60)},
        status=429,
    )
