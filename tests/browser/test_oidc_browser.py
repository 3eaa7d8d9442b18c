"""Company sign-in in a real browser, under the Content-Security-Policy: the sign-in page's button
takes the person to the identity provider (its own process, tests/access/oidc_provider.py), they
sign in there, and come back signed in to ragchat with their group's tag; signing out passes
through the provider, which ends its own session (the next sign-in asks again); a refusal comes
back to the sign-in page with the reason. Screenshots at desktop and phone widths in
test-artifacts/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import LiveServer

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

SETUP = r"""
from documents.models import Tag
from access.models import GroupMapping
finance = Tag.objects.create(name="Finance", slug="finance")
GroupMapping.objects.create(group="finance-team", tag=finance, role="member")
"""


@pytest.fixture(scope="module")
def sites(tmp_path_factory, ollama_server):
    server = LiveServer(data_dir=tmp_path_factory.mktemp("oidc"), ollama_url=ollama_server.url)
    provider = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests/access/oidc_provider.py"),
            "--client-id",
            "ragchat-browser",
            "--client-secret",
            "browser-secret",
            "--redirect-uri",
            server.url + "/oidc/callback/",
            "--post-logout-redirect-uri",
            server.url + "/accounts/login/",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert provider.stdout is not None
    issuer = "http://127.0.0.1:" + provider.stdout.readline().split()[1]
    server.env.update(
        RAGCHAT_OIDC_ISSUER=issuer,
        RAGCHAT_OIDC_CLIENT_ID="ragchat-browser",
        RAGCHAT_OIDC_CLIENT_SECRET="browser-secret",
        RAGCHAT_OIDC_SCOPES="openid email profile groups offline_access",
        RAGCHAT_OIDC_LABEL="Example Corp",
    )
    httpx.post(
        issuer + "/control", json={"users": {"alice": {"groups": ["finance-team"], "name": "Alice Example"}}}
    ).raise_for_status()
    server.manage("migrate", "-v0")
    server.shell(SETUP)
    server.start()
    yield server, issuer
    server.stop()
    provider.terminate()
    provider.wait(timeout=10)


@pytest.mark.parametrize("width,height,label", [(1280, 900, "desktop"), (390, 844, "phone")])
def test_company_sign_in_through_the_provider(sites, chromium, width, height, label):
    server, issuer = sites
    context = chromium.new_context(viewport={"width": width, "height": height})  # CSP enforced
    page = context.new_page()
    try:
        page.goto(server.url + "/accounts/login/")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"oidc-sign-in-{label}.png"), full_page=True)
        page.click("text=Sign in with Example Corp")
        page.wait_for_url(issuer + "/authorize?*")
        page.fill("input[name=username]", "alice")
        page.click("button")
        page.wait_for_url(server.url + "/")
        documents = page.goto(server.url + "/documents/")
        assert documents is not None and documents.ok
        assert "Finance" in page.content()  # her group's tag is hers

        # Signing out ends the provider's session too: the next company sign-in asks again.
        page.click("button:has-text('Sign out')")
        page.wait_for_url(server.url + "/accounts/login/")
        page.screenshot(path=str(ARTIFACTS / f"oidc-signed-out-{label}.png"), full_page=True)
        page.click("text=Sign in with Example Corp")
        page.wait_for_url(issuer + "/authorize?*")
        assert page.locator("input[name=username]").is_visible()

        page.context.clear_cookies()
        page.goto(server.url + "/accounts/login/")
        page.click("text=Sign in with Example Corp")
        page.fill("input[name=username]", "nobody")
        page.click("button")
        page.wait_for_url(server.url + "/accounts/login/")
        assert "Example Corp did not sign you in" in page.inner_text(".flash")
        page.screenshot(path=str(ARTIFACTS / f"oidc-refused-{label}.png"), full_page=True)
    finally:
        context.close()
