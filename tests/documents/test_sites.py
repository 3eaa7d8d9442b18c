"""Website import end to end: a real HTTP server (tests/documents/fixture_site.py) crawled through
the real pipeline into the real (embedded) Qdrant; re-crawl updates, removes and keeps; SSRF."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from documents import sites
from documents.models import CrawlRun, Document
from tests.documents.fixture_site import FixtureSite

pytestmark = pytest.mark.django_db


@pytest.fixture
def fixture_site():
    site = FixtureSite().start()
    yield site
    site.stop()


@pytest.fixture
def crawl_settings(settings):
    settings.RAGCHAT_CRAWL_ALLOW_PRIVATE = True  # the test server is on loopback: allowed only by this setting
    settings.RAGCHAT_CRAWL_DELAY_SECONDS = 0.0
    settings.RAGCHAT_CRAWL_TIMEOUT_SECONDS = 1.0
    settings.RAGCHAT_CRAWL_MAX_PAGE_BYTES = 200_000
    settings.RAG_ALLOWLIST_DOMAINS = []
    return settings


@pytest.fixture
def source(fixture_site, tags, people):
    return sites.site_create(
        user=people["owner"],
        name="Help centre",
        tag=tags["finance"],
        start_urls=fixture_site.url("/"),
        allowed_domains="localhost",
        max_pages=50,
        max_depth=3,
    )


def crawl(source) -> CrawlRun:
    run = sites.crawl_request(site=source)
    sites.crawl_run_sync(run.pk)
    run.refresh_from_db()
    return run


def web_documents(source) -> dict[str, Document]:
    return {d.source_url.split(":", 2)[2].split("/", 1)[1]: d for d in Document.objects.filter(site=source)}


def test_crawl_takes_each_page_once_and_records_every_refusal(
    rag_runtime, vectors, crawl_settings, fixture_site, source
):
    run = crawl(source)
    assert run.status == "done", run.error
    docs = web_documents(source)
    # A5: /docs/, /docs/index.html, /docs?utm_…, /docs/#vacation and http://LOCALHOST:port/docs are one page;
    # /about?b=2&a=1, /about?a=1&b=2&fbclid=…, the /old-about redirect and /alias (rel=canonical) another.
    assert sorted(docs) == ["", "about?a=1&b=2", "docs", "expenses"]
    assert all(d.status == "ready" and d.source_kind == "web" for d in docs.values()), [d.error for d in docs.values()]
    assert docs["docs"].title == "Leave policy"
    assert run.pages == run.added == 4 and run.removed == 0
    reasons = {r.url.split("/", 3)[3]: (r.kind, r.reason) for r in run.refusals.all()}
    assert reasons["private/salaries"] == ("refused", "disallowed by robots.txt")
    assert reasons["missing"] == ("gone", "the server answered 404")
    assert reasons["slow"][0] == "transient" and "within 1 s" in reasons["slow"][1]
    assert reasons["handbook.pdf"] == ("refused", "not an HTML page (application/pdf)")
    assert reasons["loop-a"][1].startswith("redirect loop:")
    assert "larger than the 195 KB limit" in reasons["huge"][1]
    assert "example.org is not in the allowlist" in reasons["away -> http://example.org/elsewhere"][1]
    # off-domain links are never fetched, nor are other spellings of a page fetched twice
    assert not any("offsite" in path for path in fixture_site.requests)
    assert sum(1 for path in fixture_site.requests if path.startswith("/docs")) == 1
    # the chunks carry the page URL and the allowlist, for the citation link (A4)
    hits = vectors.search("paid leave HR portal", user_tags=["finance"])
    top = next(h for h in hits if h.document_id == str(docs["docs"].pk))
    assert top.metadata["source_url"] == fixture_site.url("/docs")
    assert top.metadata["allowed_domains"] == ["localhost"]
    assert vectors.count() == sum(d.chunk_count for d in docs.values())
    print(
        json.dumps({"crawl_pages": run.pages, "seconds": round(run.seconds, 2), "pages_per_s": run.pages / run.seconds})
    )


def test_recrawl_updates_changed_removes_gone_and_leaves_unchanged_untouched(
    rag_runtime, vectors, crawl_settings, fixture_site, source
):
    crawl(source)
    before = {path: (d.pk, d.version, d.updated_at, d.content_hash) for path, d in web_documents(source).items()}
    fixture_site.set_html("/expenses", "Travel expenses", "Travel expenses are now refunded within 10 days.")
    del fixture_site.pages["/about"]  # gone: 404 from now on
    del fixture_site.pages["/alias"]
    fixture_site.redirects.pop("/old-about")
    run = crawl(source)
    assert run.status == "done", run.error
    after = web_documents(source)
    assert sorted(after) == ["", "docs", "expenses"]
    assert (run.changed, run.unchanged, run.removed) == (1, 2, 1)
    assert after["expenses"].version == 2 and after["expenses"].content_hash != before["expenses"][3]
    for path in ("", "docs"):  # untouched: same row, same version, not even saved
        assert (after[path].pk, after[path].version, after[path].updated_at) == before[path][:3]
    assert vectors.count(document_id=str(before["about?a=1&b=2"][0])) == 0
    hits = vectors.search("refunded within 10 days", user_tags=["finance"])
    assert any("10 days" in h.chunk_text for h in hits if h.document_id == str(after["expenses"].pk))
    assert vectors.count() == sum(d.chunk_count for d in after.values())


def test_ssrf_loopback_refused_without_the_setting_and_nothing_lost(
    rag_runtime, vectors, crawl_settings, fixture_site, source
):
    crawl(source)
    indexed = vectors.count()
    crawl_settings.RAGCHAT_CRAWL_ALLOW_PRIVATE = False
    run = crawl(source)
    assert run.status == "failed" and "Nothing was removed" in run.error
    refusal = run.refusals.get()
    assert "loopback address" in refusal.reason and "refused for safety" in refusal.reason
    assert Document.objects.filter(site=source).count() == 4 and vectors.count() == indexed
    assert fixture_site.requests.count("/robots.txt") == 1  # the second crawl sent nothing


def test_unreachable_site_fails_clearly(rag_runtime, crawl_settings, tags, people):
    site = sites.site_create(
        user=people["owner"], name="Down", tag=tags["finance"], start_urls="http://localhost:9/", max_pages=5
    )
    run = crawl(site)
    assert run.status == "failed"
    assert "could not be read" in run.refusals.get().reason


def test_site_source_validation(crawl_settings, tags, people):
    with pytest.raises(sites.SiteRefused, match="not an http"):
        sites.site_create(user=people["owner"], name="x", tag=tags["finance"], start_urls="ftp://files.example.com/")
    with pytest.raises(sites.SiteRefused, match="outside the allowed domains"):
        sites.site_create(
            user=people["owner"],
            name="x",
            tag=tags["finance"],
            start_urls="https://help.example.com/",
            allowed_domains="docs.example.com",
        )
    with pytest.raises(sites.SiteRefused, match="may not add sources"):
        sites.site_create(user=people["member"], name="x", tag=tags["finance"], start_urls="https://example.com/")
    crawl_settings.RAG_ALLOWLIST_DOMAINS = ["example.com"]
    with pytest.raises(sites.SiteRefused, match="RAG_ALLOWLIST_DOMAINS"):
        sites.site_create(user=people["owner"], name="x", tag=tags["finance"], start_urls="https://example.org/")
    site = sites.site_create(
        user=people["owner"], name="", tag=tags["finance"], start_urls="HTTPS://Help.Example.com:443/index.html"
    )
    assert site.start_urls == ["https://help.example.com/"] and site.allowed_domains == ["help.example.com"]


def test_crawl_site_command_for_the_configured_site(rag_runtime, crawl_settings, fixture_site, tags, people):
    import io

    from django.core.management import call_command

    crawl_settings.RAG_CRAWL_START_URLS = [fixture_site.url("/docs/index.html")]
    crawl_settings.RAG_ALLOWLIST_DOMAINS = ["localhost"]
    crawl_settings.RAG_MAX_PAGES = 2
    out, err = io.StringIO(), io.StringIO()
    call_command("crawl_site", "--configured", "--tag", "finance", stdout=out, stderr=err)
    assert "done" in out.getvalue() and "2 pages (2 new" in out.getvalue(), out.getvalue() + err.getvalue()
    call_command("crawl_site", "--configured", "--tag", "finance", stdout=out, stderr=err)
    assert "2 pages (0 new, 0 changed, 2 unchanged), 0 removed" in out.getvalue()
    assert Document.objects.filter(source_kind="web").count() == 2


@pytest.mark.django_db(transaction=True)
def test_crawl_progress_is_live_for_those_who_manage_the_source(
    rag_runtime, crawl_settings, fixture_site, source, people
):
    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator

    from documents.consumers import DocumentProgressConsumer

    run = sites.crawl_request(site=source)

    async def frames_of(communicator) -> list[str]:
        frames = []
        while not await communicator.receive_nothing(timeout=0.3):
            frames.append(await communicator.receive_from())
        return frames

    async def scenario():
        owner = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/?sites=1")
        owner.scope["user"] = people["owner"]
        owner_on_list = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/")
        owner_on_list.scope["user"] = people["owner"]
        on_its_page = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), f"/ws/documents/?site={source.pk}")
        on_its_page.scope["user"] = people["owner"]
        on_another = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), f"/ws/documents/?site={source.pk + 1}")
        on_another.scope["user"] = people["owner"]
        member = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/?sites=1")
        member.scope["user"] = people["member"]
        member_on_list = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/")
        member_on_list.scope["user"] = people["member"]
        everyone = (owner, owner_on_list, on_its_page, on_another, member, member_on_list)
        for communicator in everyone:
            assert (await communicator.connect())[0]
        await sites.crawl_run(run.pk)
        seen = [await frames_of(communicator) for communicator in everyone]
        for communicator in everyone:
            await communicator.disconnect()
        return seen

    seen_by_owner, seen_on_list, seen_on_its_page, seen_on_another, seen_by_member, seen_by_member_on_list = (
        async_to_sync(scenario)()
    )
    # the documents list (no ?sites=1) gets the rows but no site card it could not place
    assert not any("site-progress" in f for f in seen_on_list) and any("doc-row" in f for f in seen_on_list)
    cards = [f for f in seen_by_owner if f'id="site-progress-{source.pk}"' in f]
    assert len(cards) >= 5 and all('hx-swap-oob="true"' in f for f in cards)
    # the first as it stood when the page connected (the run queued), then live
    assert ">queued<" in cards[0] and "crawling" in cards[1]
    assert "<strong>4</strong> pages" in cards[-1] and ">done<" in cards[-1]
    # the websites pages get the cards only, each source's page its own card only: no row or count
    # they could not place
    assert not any("doc-row" in f or "document-count" in f for f in seen_by_owner + seen_on_its_page)
    assert [f for f in seen_on_its_page if "site-progress" in f] and not seen_on_another
    # the member reads the pages (finance) and gets their rows live, but not the source's progress
    assert not seen_by_member
    assert any('class="doc-row"' in f and "web" in f for f in seen_by_member_on_list)


@pytest.mark.parametrize("embedder", ["hashing", pytest.param("minilm", marks=pytest.mark.slow)])
def test_crawl_throughput_is_measured(rag_runtime, crawl_settings, fixture_site, tags, people, embedder):
    """40 linked pages crawled through the whole path (fetch, robots, extraction, pipeline into the
    embedded Qdrant with the test embedder, and with the real local model), no politeness delay:
    pages/s printed for the report."""
    if embedder == "minilm":
        from dataclasses import replace

        from ragchat import runtime

        crawl_settings.RAG = replace(rag_runtime, embedding_backend="local", embedding_model="all-MiniLM-L6-v2")
        runtime.reset()
    topics = ["leave", "travel", "expenses", "laptops", "security", "payroll", "onboarding", "parking"]
    paths = [f"/kb/{i:02d}-{topics[i % len(topics)]}" for i in range(40)]
    for i, path in enumerate(paths):
        fixture_site.set_html(
            path,
            f"Article {i}: {topics[i % len(topics)]}",
            f"Article {i} explains the {topics[i % len(topics)]} rules of Brightwater Tools. " * 6,
            links=paths[i + 1 : i + 4],
        )
    site = sites.site_create(
        user=people["owner"],
        name="KB",
        tag=tags["finance"],
        start_urls=fixture_site.url(paths[0]),
        max_pages=40,
        max_depth=20,
    )
    run = crawl(site)
    assert run.status == "done" and run.pages == run.added == 40, (run.error, run.pages)
    print(
        json.dumps(
            {
                "embedder": embedder,
                "crawl_pages": run.pages,
                "seconds": round(run.seconds, 2),
                "pages_per_s": round(run.pages / run.seconds, 1),
            }
        )
    )


def test_schedule_recrawls_due_sites_and_syncs_configured_folders(
    rag_runtime, crawl_settings, fixture_site, tags, people, tmp_path
):
    from datetime import timedelta

    from django.utils import timezone

    from documents.schedule import run_schedule_once

    due = sites.site_create(
        user=people["owner"],
        name="Due",
        tag=tags["finance"],
        start_urls=fixture_site.url("/docs"),
        max_depth=0,
        recrawl_hours=24,
    )
    later = sites.site_create(
        user=people["owner"],
        name="Later",
        tag=tags["finance"],
        start_urls=fixture_site.url("/expenses"),
        max_depth=0,
        recrawl_hours=24,
    )
    sites.SiteSource.objects.filter(pk=due.pk).update(next_crawl_at=timezone.now() - timedelta(minutes=1))
    folder = tmp_path / "configured"
    folder.mkdir()
    (folder / "note.txt").write_text("The canteen opens at 11:30 on weekdays.\n")
    crawl_settings.RAGCHAT_SYNC_FOLDERS = f"{folder}=finance"
    done = run_schedule_once()
    assert (done["crawls"], done["folders"], done["problems"]) == (1, 1, [])
    assert due.runs.get().status == "done" and not later.runs.exists()
    due.refresh_from_db()
    assert due.next_crawl_at > timezone.now() + timedelta(hours=23)
    assert Document.objects.filter(site=due).count() == 1
    assert Document.objects.filter(source_kind="folder", status="ready").count() == 1


def test_citations_link_to_the_page_only_inside_the_allowlist(settings):
    """A4 in the chat: a web page's citation card opens the page; one whose URL left the allowlist
    (or the server's RAG_ALLOWLIST_DOMAINS) opens the document's page in the app instead."""
    from chat.rendering import render_answer

    def cited(document_id: str, metadata: dict) -> dict:
        return {
            "source_id": f"{document_id}:0",
            "document_id": document_id,
            "document_name": "Leave policy",
            "chunk_index": 0,
            "snippet": "Twenty-five days.",
            "snippet_full": "Twenty-five days.",
            "relevance_score": 0.9,
            "metadata": metadata,
        }

    inside = cited(
        "11111111-1111-4111-8111-111111111111",
        {"source_url": "https://help.example.com/leave", "allowed_domains": ["example.com"]},
    )
    outside = cited(
        "22222222-2222-4222-8222-222222222222", {"source_url": "https://evil.org/x", "allowed_domains": ["example.com"]}
    )
    settings.RAG_ALLOWLIST_DOMAINS = []
    text = f"Leave [SourceId: {inside['source_id']}] and more [SourceId: {outside['source_id']}]."
    rendered = render_answer(text, known=[inside, outside], prefix="m1")
    urls = [s["url"] for s in rendered.sources]
    assert urls == ["https://help.example.com/leave", f"/documents/{outside['document_id']}/"]
    assert 'href="https://help.example.com/leave" rel="noopener noreferrer" target="_blank">Open page<' in rendered.html
    assert "evil.org" not in rendered.html
    settings.RAG_ALLOWLIST_DOMAINS = ["clockify.me"]  # the server's ceiling wins
    rendered = render_answer(text, known=[inside, outside], prefix="m2")
    assert [s["url"] for s in rendered.sources][0] == f"/documents/{inside['document_id']}/"


def test_a_crawl_interrupted_by_a_stop_does_not_block_the_site(crawl_settings, tags, people):
    from django.utils import timezone

    site = sites.site_create(user=people["owner"], name="x", tag=tags["finance"], start_urls="https://example.com/")
    stuck = sites.crawl_request(site=site)
    CrawlRun.objects.filter(pk=stuck.pk).update(status="running", started_at=timezone.now())
    assert sites.crawl_request(site=site).pk == stuck.pk  # one crawl at a time per site
    assert sites.crawls_fail_interrupted(started_before=timezone.now()) == 1
    stuck.refresh_from_db()
    assert stuck.status == "failed" and "interrupted" in stuck.error
    assert sites.crawl_request(site=site).pk != stuck.pk


@pytest.mark.django_db(transaction=True)
def test_crawl_enqueued_for_a_db_worker(rag_runtime, crawl_settings, fixture_site, tags, people):
    """Scale-out: with the "tasks" backend a crawl is a django-tasks task that `db_worker` runs."""
    import io

    from django.core.management import call_command
    from django_tasks_db.models import DBTaskResult

    from documents.tasks import crawl_enqueue

    crawl_settings.RAGCHAT_INGEST_BACKEND = "tasks"
    site = sites.site_create(
        user=people["owner"], name="KB", tag=tags["finance"], start_urls=fixture_site.url("/docs"), max_depth=0
    )
    run = sites.crawl_request(site=site)
    assert crawl_enqueue(run.pk) == "worker"
    assert DBTaskResult.objects.filter(queue_name="ingestion").count() == 1
    call_command(
        "db_worker",
        "--batch",
        "--queue-name",
        "ingestion",
        "--no-startup-delay",
        "--no-reload",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    run.refresh_from_db()
    assert run.status == "done" and run.added == 1, run.error
    assert Document.objects.get(site=site).status == "ready"


def test_site_pages_add_crawl_and_delete(client, rag_runtime, vectors, crawl_settings, fixture_site, tags, people):
    client.force_login(people["owner"])
    page = client.get("/documents/sites/").content.decode()
    assert "Add a website" in page and "No websites yet" in page
    refused = client.post(
        "/documents/sites/new",
        {
            "name": "x",
            "tag": tags["finance"].pk,
            "start_urls": "ftp://files/",
            "max_pages": 10,
            "max_depth": 2,
            "recrawl_hours": 0,
        },
    )
    assert refused.status_code == 200 and "is not an http(s) address" in refused.content.decode()
    created = client.post(
        "/documents/sites/new",
        {
            "name": "Help",
            "tag": tags["finance"].pk,
            "start_urls": fixture_site.url("/"),
            "allowed_domains": "localhost",
            "max_pages": 10,
            "max_depth": 2,
            "exclude_patterns": "/expenses",
            "recrawl_hours": 24,
        },
    )
    assert created.status_code == 302  # outside a server the first crawl runs before the answer
    site = sites.SiteSource.objects.get(name="Help")
    detail = client.get(created["Location"]).content.decode()
    assert "<strong>3</strong> pages" in detail and "excluded by the source" in detail
    assert "disallowed by robots.txt" in detail and fixture_site.url("/docs") in detail
    assert client.post(f"/documents/sites/{site.pk}/crawl").status_code == 302
    assert site.runs.count() == 2 and site.runs.first().unchanged == 3
    listed = client.get("/documents/?source=web").content.decode()
    assert fixture_site.url("/about?a=1&amp;b=2") in listed
    ids = [str(d.pk) for d in Document.objects.filter(site=site)]
    assert client.post(f"/documents/sites/{site.pk}/delete").status_code == 302
    assert not Document.objects.filter(pk__in=ids).exists() and not sites.SiteSource.objects.filter(pk=site.pk).exists()
    assert all(vectors.count(document_id=i) == 0 for i in ids)
    client.force_login(people["member"])
    assert client.get("/documents/sites/").status_code == 404


def _unmasked(response) -> str:
    """A page without its CSRF token (masked anew on every response)."""
    return re.sub(r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"', "", response.content.decode())


def test_deleting_a_site_source_without_script_asks_first_on_a_page_of_its_own(client, tags, people):
    """The source's Delete leads, without script, to a page that asks (GET changes nothing); its Delete
    posts, its Cancel goes back to the source. With script it still asks in a dialog (data-confirm)
    and htmx posts; the server sends the browser to the websites list. Anyone who may not manage the
    source (a member of its tag, another tenant) gets the missing source's 404."""
    site = sites.SiteSource.objects.create(
        tenant_id="default", name="Help <centre>", tag=tags["finance"], start_urls=["http://127.0.0.1:9/"]
    )
    url = reverse("documents:site_delete", args=[site.pk])
    detail_url = reverse("documents:site_detail", args=[site.pk])
    client.force_login(people["owner"])
    detail = client.get(detail_url).content.decode()
    link = re.findall(r"<(?:a|form) [^>]*data-confirm=\"Delete this website source[^>]*>", detail)
    assert len(link) == 1 and link[0].startswith("<a ") and f'href="{url}"' in link[0]
    assert f'hx-post="{url}"' in link[0]

    page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and "<title>Delete this website source? · ragchat</title>" in html
    assert 'class="topbar"' in html and '<h1 id="confirm-title">Delete this website source?</h1>' in html
    assert "“Help &lt;centre&gt;” and its 0 pages will be deleted" in html
    assert re.search(rf'<form method="post" action="{url}">\s*<input type="hidden" name="csrfmiddlewaretoken"', html)
    assert f'href="{detail_url}">Cancel</a>' in html
    assert sites.SiteSource.objects.filter(pk=site.pk).exists()

    missing = reverse("documents:site_delete", args=[999999])
    for who in ("member", "outsider", "other_tenant"):
        client.force_login(people[who])
        theirs, absent = client.get(url), client.get(missing)
        assert theirs.status_code == absent.status_code == 404, who
        assert _unmasked(theirs) == _unmasked(absent) and "Help" not in theirs.content.decode(), who
    assert sites.SiteSource.objects.filter(pk=site.pk).exists()

    client.force_login(people["owner"])
    response = client.post(url)
    assert response.status_code == 302 and response.url == reverse("documents:sites")
    assert not sites.SiteSource.objects.filter(pk=site.pk).exists()

    site = sites.SiteSource.objects.create(
        tenant_id="default", name="Asked in a dialog", tag=tags["finance"], start_urls=["http://127.0.0.1:9/"]
    )
    response = client.post(reverse("documents:site_delete", args=[site.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("documents:sites")
    assert not sites.SiteSource.objects.filter(pk=site.pk).exists()
    assert (
        "“Asked in a dialog” and its 0 pages were deleted." in client.get(reverse("documents:sites")).content.decode()
    )
