"""The token page and the API docs in a real browser (Debian's Chromium, CSP enforced): a person makes
a token, sees its secret once and calls the API with it; the Swagger UI served by the app renders
every operation with no Content-Security-Policy violation. Screenshots at 1280x800 and 390x844 in
test-artifacts/."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import (  # noqa: F401 (fixtures)
    ARTIFACTS,
    LiveServer,
    chromium,
    chromium_browser,
    csp_context,
)

pytestmark = pytest.mark.browser

SETUP = r"""
from ragchat.models import User
from documents.services import tag_create, tag_ensure_public
ann = User.objects.create_user("ann", password="pw-ann-12345", first_name="Ann", last_name="Lee")
User.objects.create_user("root", password="pw-root-12345", first_name="Ruth", is_superuser=True, is_staff=True)
tag_ensure_public(tenant_id="default")
tag_create(tenant_id="default", name="Handbook", slug="handbook", owner=ann)
"""

SIZES = {"desktop": (1280, 800), "phone": (390, 844)}


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = LiveServer(data_dir=tmp_path_factory.mktemp("api-browser"), ollama_url=ollama_server.url)
    server.manage("migrate", "-v0")
    server.shell(SETUP)
    server.start()
    yield server
    server.stop()


def _page(chromium, size):  # noqa: F811
    """A page under the app's CSP and what its pages report (tests/browser/conftest.py's watch)."""
    context, violations = csp_context(chromium, *SIZES[size])
    return context, context.new_page(), violations


def _sign_in(page, url, username, password):
    page.goto(url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(url + "/")


def _too_wide(page) -> list[str]:
    """What makes the page scroll sideways: the document's width past the window's, and the
    elements (outside a table's own scroll region) that reach past the window's right edge."""
    return page.evaluate(
        """() => {
          const w = window.innerWidth, doc = document.documentElement.scrollWidth;
          if (doc <= w + 1) return [];
          const wide = [...document.querySelectorAll('body *')]
            .filter(e => !(e.parentElement && e.parentElement.closest('.table-scroll')))
            .filter(e => e.getBoundingClientRect().right > w + 1)
            .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
          return ['document ' + doc + ' > ' + w, ...wide];
        }"""
    )


@pytest.mark.parametrize("size", SIZES)
def test_make_a_token_see_it_once_and_use_it(server, chromium, size):  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    context, page, violations = _page(chromium, size)
    try:
        _sign_in(page, server.url, "ann", "pw-ann-12345")
        page.goto(server.url + "/api/tokens/")
        page.fill("input[name=name]", f"Build bot ({size})")
        page.check("input[name=scopes][value=read]")
        page.check("input[name=scopes][value=chat]")
        page.select_option("select[name=expires_in_days]", "30")
        page.click("button:has-text('Create token')")
        page.wait_for_url(server.url + "/api/tokens/")
        secret = page.input_value("#new-token")
        assert secret.startswith("rct_")
        page.screenshot(path=str(ARTIFACTS / f"api-tokens-created-{size}.png"), full_page=True)
        assert not _too_wide(page), _too_wide(page)
        # The Copy button puts the whole token on the clipboard and says so.
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        copy = page.get_by_role("button", name="Copy")
        copy.click()
        page.wait_for_selector(".token-copy button:has-text('Copied')")
        assert page.evaluate("navigator.clipboard.readText()") == secret
        # A reload asks the server again with a GET: no second token, and the secret is gone.
        page.reload()
        assert page.locator("#new-token").count() == 0 and secret not in page.content()
        assert page.locator("tr", has_text=f"Build bot ({size})").count() == 1
        response = httpx.get(server.url + "/api/v1/sessions", headers={"Authorization": f"Bearer {secret}"})
        assert response.status_code == 200 and response.json() == []
        page.goto(server.url + "/api/tokens/")  # shown once: the list names it by its prefix only
        assert secret not in page.content() and f"Build bot ({size})" in page.content()
        # Revoke it on the page: a dialog asks first, naming the token; accepted, the next call is refused.
        asked: list[tuple[str, str]] = []

        def accept(dialog):
            asked.append((dialog.type, dialog.message))
            dialog.accept()

        page.once("dialog", accept)
        page.locator("tr", has_text=f"Build bot ({size})").locator("button:has-text('Revoke')").click()
        page.wait_for_selector("text=is revoked")
        assert asked == [("confirm", f"Revoke “Build bot ({size})”? Calls with it are refused from then on.")]
        assert (
            httpx.get(server.url + "/api/v1/sessions", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
        )
        page.screenshot(path=str(ARTIFACTS / f"api-tokens-{size}.png"), full_page=True)
        assert not violations, violations
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES)
def test_a_token_form_without_a_scope_says_so_and_keeps_the_rest(server, chromium, size):  # noqa: F811
    context, page, violations = _page(chromium, size)
    try:
        _sign_in(page, server.url, "ann", "pw-ann-12345")
        page.goto(server.url + "/api/tokens/")
        page.fill("input[name=name]", "Wiki sync")
        page.select_option("select[name=expires_in_days]", "365")
        page.click("button:has-text('Create token')")
        alert = page.get_by_role("alert")
        assert "Scopes: Choose at least one scope" in alert.inner_text()
        assert "This field is required" not in page.content()
        assert page.locator("#scopes-error").is_visible()
        assert page.input_value("input[name=name]") == "Wiki sync"
        assert page.input_value("select[name=expires_in_days]") == "365"
        page.screenshot(path=str(ARTIFACTS / f"api-tokens-no-scope-{size}.png"), full_page=True)
        target = alert.get_by_role("link", name="Scopes").get_attribute("href")  # the summary leads to the field
        assert page.locator(target).get_attribute("name") == "scopes"
        assert not _too_wide(page), _too_wide(page)
        assert not violations, violations
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES)
def test_admins_see_every_token_of_the_tenant(server, chromium, size):  # noqa: F811
    context, page, violations = _page(chromium, size)
    try:
        _sign_in(page, server.url, "root", "pw-root-12345")
        page.goto(server.url + "/api/tokens/all/")
        assert "Build bot" in page.content() and "Ann Lee" in page.content()
        page.screenshot(path=str(ARTIFACTS / f"api-tokens-admin-{size}.png"), full_page=True)
        assert not _too_wide(page), _too_wide(page)
        assert not violations, violations
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES)
def test_the_docs_page_renders_every_operation_under_the_csp(server, chromium, size):  # noqa: F811
    context, page, violations = _page(chromium, size)
    try:
        page.goto(server.url + "/api/v1/docs")
        page.wait_for_selector(".opblock", timeout=20_000)
        summaries = page.locator(".opblock-summary-path").all_inner_texts()
        paths = {s.replace("\u200b", "").strip() for s in summaries}
        assert {"/api/v1/search", "/api/v1/chat", "/api/v1/documents", "/api/v1/health"} <= paths, paths
        assert page.locator("button.authorize").count() == 1  # the bearer token can be entered
        page.screenshot(path=str(ARTIFACTS / f"api-docs-{size}.png"), full_page=False)
        assert not violations, violations
    finally:
        context.close()
