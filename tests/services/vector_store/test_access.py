"""The access rule as data: what every search stage carries into the engine, and its re-check."""

from __future__ import annotations

from ragchat.services.vector_store.access import Conditions, access_conditions, allowed, scope_conditions


def test_access_conditions_always_admit_public_and_only_the_tenant():
    conditions = access_conditions(user_tags=["hr", "", "finance", "hr"], tenant_id="acme")
    assert conditions == Conditions(equals=(("tenant_id", "acme"),), any_of=(("tags", ("finance", "hr", "public")),))
    assert access_conditions(user_tags=[], tenant_id="default").any_of == (("tags", ("public",)),)


def test_allowed_rechecks_tenant_and_tags():
    conditions = access_conditions(user_tags=["hr"], tenant_id="default")
    assert allowed({"tenant_id": "default", "tags": ["hr", "it"]}, conditions)
    assert allowed({"tenant_id": "default", "tags": ["public"]}, conditions)
    assert not allowed({"tenant_id": "default", "tags": ["finance"]}, conditions)
    assert not allowed({"tenant_id": "acme", "tags": ["hr"]}, conditions)
    assert not allowed({"tenant_id": "default"}, conditions)


def test_scope_conditions_name_only_what_is_given():
    assert scope_conditions() == Conditions()
    assert scope_conditions(document_id="d1") == Conditions(equals=(("document_id", "d1"),))
    assert scope_conditions(document_id="d1", tenant_id="t").equals == (("document_id", "d1"), ("tenant_id", "t"))
