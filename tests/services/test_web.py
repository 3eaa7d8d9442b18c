"""Canonical URLs (A5), the allowlist (A4) and the SSRF address rule, without a network."""

from __future__ import annotations

import pytest

from ragchat.services.web.fetch import address_refusal
from ragchat.services.web.urls import canonical_url, host_allowed, normalise_domains, path_selected

ONE_PAGE = [
    "https://help.example.com/docs/leave",
    "HTTPS://Help.Example.COM/docs/leave",
    "https://help.example.com:443/docs/leave",
    "https://help.example.com/docs/leave/",
    "https://help.example.com/docs/leave/index.html",
    "https://help.example.com/docs/leave#sick-days",
    "https://help.example.com/docs/leave?utm_source=newsletter&utm_medium=email",
    "https://help.example.com/docs/leave?fbclid=abc&gclid=def",
]


@pytest.mark.parametrize("variant", ONE_PAGE)
def test_url_variants_collapse_to_one_id(variant):
    assert canonical_url(variant) == "https://help.example.com/docs/leave"


def test_query_order_and_default_http_port_collapse_and_real_parameters_stay():
    assert canonical_url("http://Example.com:80/search?b=2&a=1") == canonical_url("http://example.com/search?a=1&b=2")
    assert canonical_url("http://example.com/search?a=1&b=2") == "http://example.com/search?a=1&b=2"
    assert canonical_url("http://example.com/p?id=1") != canonical_url("http://example.com/p?id=2")
    assert (
        canonical_url("https://example.com") == canonical_url("https://example.com/index.htm") == "https://example.com/"
    )
    assert canonical_url("../about", "https://example.com/docs/leave/") == "https://example.com/docs/about"


@pytest.mark.parametrize("url", ["mailto:hr@example.com", "javascript:alert(1)", "ftp://example.com/x", "", "/rel"])
def test_what_is_not_a_web_page_has_no_id(url):
    assert canonical_url(url) is None


def test_allowlist_takes_domains_and_their_subdomains_only():
    domains = normalise_domains(["https://Help.Example.com/start", "clockify.me", " "])
    assert domains == ["help.example.com", "clockify.me"]
    assert host_allowed("https://help.example.com/x", domains)
    assert host_allowed("https://eu.help.example.com/x", domains)
    assert host_allowed("https://clockify.me/", domains)
    assert not host_allowed("https://example.com/", domains)
    assert not host_allowed("https://evilclockify.me/", domains)
    assert not host_allowed("https://clockify.me.evil.com/", domains)
    assert not host_allowed("ftp://clockify.me/", domains)


def test_path_patterns():
    assert path_selected("https://a.com/docs/x", include=["/docs/*"], exclude=[])
    assert not path_selected("https://a.com/blog/x", include=["/docs/*"], exclude=[])
    assert not path_selected("https://a.com/docs/old/x", include=["/docs/*"], exclude=["/docs/old/*"])
    assert path_selected("https://a.com/anything", include=[], exclude=[])


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.5", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("fe80::1", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "not a public"),
        ("0.0.0.0", "private"),
        ("224.0.0.1", "not a public"),
    ],
)
def test_ssrf_rule_refuses_internal_addresses(address, why):
    assert why in (address_refusal(address) or "")


def test_ssrf_rule_takes_public_addresses():
    assert address_refusal("93.184.216.34") is None
    assert address_refusal("2606:2800:220:1:248:1893:25c8:1946") is None


def test_citation_links_only_into_the_allowlist():
    from ragchat.services.web.urls import citation_link

    page = {"source_url": "https://help.example.com/docs", "allowed_domains": ["example.com"]}
    assert citation_link(page) == "https://help.example.com/docs"
    assert citation_link(page, ceiling=["example.com"]) == "https://help.example.com/docs"
    assert citation_link(page, ceiling=["other.org"]) is None
    assert citation_link({"source_url": "https://evil.org/x", "allowed_domains": ["example.com"]}) is None
    assert citation_link({"source_url": "javascript:alert(1)", "allowed_domains": ["example.com"]}) is None
    assert citation_link({}) is None


async def test_the_address_really_reached_is_checked_again():
    """DNS rebinding: a host that passed the check but whose connection lands on loopback gets its
    answer refused unread (here the check before connecting is skipped, as a rebinding DNS would)."""
    import httpx

    from ragchat.services.web.fetch import FetchPolicy, FetchRefused, _check_peer
    from tests.documents.fixture_site import FixtureSite

    site = FixtureSite().start()
    try:
        async with httpx.AsyncClient() as client, client.stream("GET", site.url("/docs")) as response:
            with pytest.raises(FetchRefused, match="the connection reached 127.0.0.1 is a loopback address"):
                _check_peer(site.url("/docs"), response, policy=FetchPolicy())
            _check_peer(site.url("/docs"), response, policy=FetchPolicy(allow_private=True))
    finally:
        site.stop()


async def _fetch_refused(url: str):
    import httpx

    from ragchat.services.web.fetch import FetchPolicy, FetchRefused, fetch

    async with httpx.AsyncClient() as client:
        with pytest.raises(FetchRefused) as refused:
            await fetch(client, url, policy=FetchPolicy(allow_private=True, timeout=10), allowed=lambda _: True)
    return refused.value


async def test_network_failures_are_told_as_sentences():
    """What the owner of a site source reads when a page could not be fetched: a sentence, not the
    resolver's or the socket's "[Errno -2] Name or service not known" / "[Errno 111] ..."."""
    import socket

    from ragchat.services.web.fetch import lookup_failure

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    refused = await _fetch_refused(f"http://127.0.0.1:{port}/")
    assert refused.reason == "the server refused the connection" and refused.transient
    nowhere = await _fetch_refused("http://no-such-host.invalid/")
    assert "Errno" not in nowhere.reason and "no-such-host.invalid" in nowhere.reason
    assert nowhere.reason in (
        "no server called no-such-host.invalid was found: check the address",
        "the name no-such-host.invalid could not be looked up just now (no answer from the name server)",
    )
    unknown = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert (
        lookup_failure("intranet.example", unknown) == "no server called intranet.example was found: check the address"
    )
