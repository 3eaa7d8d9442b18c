"""Site sources (website import): list and add, one source with its live crawl progress, start a
crawl, delete. Who may see and run a source is `access.policy.manageable_sites`; anyone else gets
a 404, as for a document they may not read."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access import policy
from documents import sites
from documents.forms import SiteForm
from documents.models import SiteSource
from documents.tasks import crawl_enqueue
from ragchat.htmx import redirect_after_post


def _site(request, site_id) -> SiteSource:
    site = policy.manageable_sites(user=request.user).filter(pk=site_id).select_related("tag").first()
    if site is None:
        raise Http404("No such site source.")
    return site


def site_context(site: SiteSource) -> dict:
    run = site.runs.first()
    return {"site": site, "run": run, "pages": site.documents.count()}


def _list(request, form):
    uploadable = policy.uploadable_tags(user=request.user)
    if not uploadable.exists():
        raise Http404("Website import is for tag owners and admins.")
    listed = policy.manageable_sites(user=request.user).select_related("tag").annotate(page_count=Count("documents"))
    return render(
        request,
        "documents/sites.html",
        {"rows": [site_context(s) | {"pages": s.page_count} for s in listed], "form": form},
    )


@login_required
@require_GET
def site_list(request):
    return _list(request, SiteForm(tag_choices=policy.uploadable_tags(user=request.user)))


@login_required
@require_POST
def site_create(request):
    uploadable = policy.uploadable_tags(user=request.user)
    if not uploadable.exists():
        raise Http404("Website import is for tag owners and admins.")
    form = SiteForm(request.POST, tag_choices=uploadable)
    if not form.is_valid():
        return _list(request, form)
    try:
        site = sites.site_create(user=request.user, **form.cleaned_data)
    except sites.SiteRefused as e:
        form.add_error(None, str(e))
        return _list(request, form)
    run = sites.crawl_request(site=site)
    crawl_enqueue(run.pk)
    # The crawl's state is the page's "Latest crawl", live: it may have ended (failed) by the time
    # the page shows, so the message does not say how it stands.
    messages.success(request, f"“{site.name}” added. Its first crawl shows under “Latest crawl”.")
    return redirect("documents:site_detail", site_id=site.pk)


@login_required
@require_GET
def site_detail(request, site_id):
    site = _site(request, site_id)
    context = site_context(site)
    context["runs"] = list(site.runs.all()[:10])
    context["refusals"] = list(context["run"].refusals.all()[:200]) if context["run"] else []
    context["documents"] = list(site.documents.order_by("source_url")[:500])
    return render(request, "documents/site_detail.html", context)


@login_required
@require_POST
def site_crawl(request, site_id):
    site = _site(request, site_id)
    run = sites.crawl_request(site=site)
    if run.status == run.Status.QUEUED and run.started_at is None:
        crawl_enqueue(run.pk)
        messages.success(request, "Crawl requested. It shows under “Latest crawl”.")
    else:
        messages.info(request, "A crawl of this site is already running.")
    return redirect("documents:site_detail", site_id=site.pk)


@login_required
@require_http_methods(["GET", "POST"])
def site_delete(request, site_id):
    """GET: the page that asks first, where the source's Delete leads without script; POST: delete.
    With script the dialog asks (data-confirm, static/js/confirm.js) and htmx posts; the server sends
    the browser where a form would go."""
    site = _site(request, site_id)
    if request.method == "GET":
        return render(request, "documents/site_delete.html", {"site": site, "pages": site.documents.count()})
    if site.runs.filter(status="running").exists():
        messages.info(request, "Wait until the crawl finishes, then delete the source.")
        return redirect_after_post(request, reverse("documents:site_detail", args=[site.pk]))
    name = site.name
    removed = sites.site_delete(site=site, actor=request.user)
    messages.success(request, f"“{name}” and its {removed} page{'s' if removed != 1 else ''} were deleted.")
    return redirect_after_post(request, reverse("documents:sites"))
