"""Glossary expansion of a query (ragchat.services.glossary): whole-word matching of terms and
aliases, a fixed order whatever order the entries come in (A1), and a bounded expansion."""

from __future__ import annotations

import random

import pytest

from ragchat.services.glossary import MAX_ADDED_WORDS, GlossaryEntry, expand_query, mentions, parse_aliases

PTO = GlossaryEntry(term="PTO", aliases=("paid time off", "vacation"), tag="hr")
VPN = GlossaryEntry(term="VPN", aliases=("virtual private network", "remote access"), tag="it")
ART = GlossaryEntry(term="art", aliases=("artwork",), tag="design")
IT = GlossaryEntry(term="IT", aliases=("information technology", "helpdesk"), tag="it")
WFH = GlossaryEntry(term="WFH", aliases=("work from home", "remote work"), tag="hr")
ENTRIES = [PTO, VPN, ART, IT, WFH]


def test_acronym_expands_with_its_missing_forms_in_order():
    assert expand_query("How much PTO do I get?", ENTRIES) == (
        "How much PTO do I get? (paid time off; vacation)",
        ["PTO"],
    )


def test_acronym_matches_in_any_case_and_in_the_plural():
    assert expand_query("how much pto do I get", ENTRIES)[1] == ["PTO"]
    assert expand_query("Do VPNs log traffic?", ENTRIES) == (
        "Do VPNs log traffic? (virtual private network; remote access)",
        ["VPN"],
    )
    assert expand_query("The VPN's certificate expired", ENTRIES)[1] == ["VPN"]


def test_multi_word_alias_names_the_entry_and_is_not_repeated():
    expanded, terms = expand_query("Can I carry over Paid Time Off?", ENTRIES)
    assert terms == ["PTO"]
    assert expanded == "Can I carry over Paid Time Off? (PTO; vacation)"
    assert expand_query("rules for paid-time-off", ENTRIES)[1] == ["PTO"]
    assert expand_query("rules for paid\ntime  off", ENTRIES)[1] == ["PTO"]


def test_no_partial_word_match():
    for query in ("How do I start?", "the artist's contract", "party time", "VPNX setup", "xPTO", "PTO2"):
        assert expand_query(query, ENTRIES) == (query, []), query
    assert not mentions("paid time offer", "paid time off")
    assert mentions("an art class", "art") and mentions("arts and crafts", "art")


def test_two_letter_acronym_needs_capitals():
    assert expand_query("how do I reset it?", ENTRIES) == ("how do I reset it?", [])
    assert expand_query("Ask IT about it", ENTRIES) == ("Ask IT about it (information technology; helpdesk)", ["IT"])
    assert expand_query("call the helpdesk", ENTRIES) == ("call the helpdesk (IT; information technology)", ["IT"])


def test_same_output_whatever_the_order_of_the_entries():
    query = "Is PTO or WFH allowed on the VPN for art?"
    expected = expand_query(query, ENTRIES)
    rng = random.Random(16)
    for _ in range(50):
        shuffled = ENTRIES[:]
        rng.shuffle(shuffled)
        assert expand_query(query, shuffled) == expected
        assert expand_query(query, tuple(reversed(shuffled))) == expected
    assert expected[1] == ["art", "PTO", "VPN", "WFH"]


def test_same_term_in_two_tags_adds_each_form_once():
    hr = GlossaryEntry(term="PTO", aliases=("vacation", "holiday"), tag="hr")
    finance = GlossaryEntry(term="pto", aliases=("Vacation", "accrued leave"), tag="finance")
    for entries in ([hr, finance], [finance, hr]):
        expanded, terms = expand_query("PTO balance", entries)
        assert terms == ["PTO"]
        assert expanded == "PTO balance (Vacation; accrued leave; holiday)"


def test_expansion_is_bounded():
    many = [GlossaryEntry(term=f"T{i}", aliases=(f"alias number {i}", f"other {i}"), tag="x") for i in range(20)]
    query = " ".join(f"T{i}" for i in range(20))
    expanded, terms = expand_query(query, many)
    assert len(terms) == 20
    added = expanded[len(query) :].strip().strip("()").replace(";", " ").split()
    assert 0 < len(added) <= MAX_ADDED_WORDS


def test_nothing_to_expand():
    assert expand_query("", ENTRIES) == ("", [])
    assert expand_query("   ", ENTRIES) == ("   ", [])
    assert expand_query("What is the parental leave policy?", ENTRIES) == ("What is the parental leave policy?", [])
    assert expand_query("PTO", []) == ("PTO", [])
    everything = "PTO, paid time off and vacation"
    assert expand_query(everything, ENTRIES) == (everything, ["PTO"])


def test_entries_with_empty_or_messy_forms():
    messy = GlossaryEntry(term="  C++  ", aliases=("", "  ", "cpp", "CPP", "c plus plus"), tag="dev")
    assert messy.forms() == ("C++", "cpp", "c plus plus")
    assert expand_query("C++ style guide", [messy]) == ("C++ style guide (cpp; c plus plus)", ["C++"])
    assert expand_query("anything", [GlossaryEntry(term="", aliases=("anything",))]) == ("anything", [])


@pytest.mark.parametrize(
    "text, aliases",
    [
        ("paid time off; vacation", ("paid time off", "vacation")),
        ("paid time off\nvacation\r\n\n", ("paid time off", "vacation")),
        (" a ;; A ; b  c ", ("a", "b c")),
        ("", ()),
    ],
)
def test_parse_aliases(text, aliases):
    assert parse_aliases(text) == aliases
