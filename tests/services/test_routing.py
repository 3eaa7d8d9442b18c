"""The one routing rule, `route_target()`: the routing app calls it with the owner facts of a tag row
it already holds (get_route_target, tested in test_rag_unit.py, looks the owner up first)."""

from ragchat.services.routing import route_target
from ragchat.services.types import TagOwner

ADMIN = "admin@company.com"


def test_owner_with_an_email_gets_the_question():
    target = route_target(tag="hr", owner=TagOwner("7", "hr@company.com"), admin_email=ADMIN)
    assert (target.tag, target.owner_user_id, target.owner_email, target.fallback) == (
        "hr",
        "7",
        "hr@company.com",
        False,
    )
    assert target.reason == "Routing to hr owner"
    assert route_target(tag="hr", owner=TagOwner("7", "hr@company.com"), admin_email=ADMIN, confidence=45).reason == (
        "Low confidence: 45% - routing to hr owner"
    )


def test_every_missing_link_goes_to_the_admin_and_says_which():
    cases = {
        "No specific tags in context - routing to admin": route_target(tag=None, owner=None, admin_email=ADMIN),
        "No owner for tag 'hr' - routing to admin": route_target(tag="hr", owner=None, admin_email=ADMIN),
        "No owner for tag 'it' - routing to admin": route_target(
            tag="it", owner=TagOwner(None, None), admin_email=ADMIN
        ),
        "Owner not found for tag 'legal' - routing to admin": route_target(
            tag="legal", owner=TagOwner("9", None), admin_email=ADMIN
        ),
    }
    for reason, target in cases.items():
        assert (
            target.reason == reason and target.fallback and target.owner_email == ADMIN and target.owner_user_id is None
        )


def test_the_prefix_leads_every_reason():
    prefix = "Asked the owner: "
    assert route_target(tag="hr", owner=TagOwner("7", "a@b.c"), admin_email=ADMIN, reason_prefix=prefix).reason == (
        "Asked the owner: Routing to hr owner"
    )
    assert route_target(tag="hr", owner=None, admin_email=ADMIN, reason_prefix=prefix).reason == (
        "Asked the owner: No owner for tag 'hr' - routing to admin"
    )
