"""The access rule of retrieval, in one place: which chunks a reader may see.

`access_conditions()` builds the one filter (same tenant, and at least one of the reader's tags or
"public") that every search stage carries into the engine; `allowed()` re-checks a returned payload
against the same conditions. The conditions are neutral: each backend translates them into its own
filter type, so no backend can hold a second, diverging copy of the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PUBLIC_TAG = "public"


@dataclass(frozen=True)
class Conditions:
    """A conjunction of payload conditions, translated by each backend into its filter type."""

    equals: tuple[tuple[str, str], ...] = ()
    any_of: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Excluded: a point whose value of the key is one of these is not matched (must_not).
    none_of: tuple[tuple[str, tuple[str, ...]], ...] = ()


# Verified knowledge no longer verified (a source it relied on changed, or its review date passed)
# carries this payload value; `cite_needs_review=False` keeps it out of retrieval altogether.
KNOWLEDGE_STATUS = "knowledge_status"
NEEDS_REVIEW = "needs_review"


def access_conditions(*, user_tags: Sequence[str], tenant_id: str, cite_needs_review: bool = True) -> Conditions:
    """THE access rule: same tenant, and at least one tag the user holds or "public"; without
    `cite_needs_review`, not a chunk of verified knowledge that needs review."""
    allowed = tuple(sorted({*(t for t in user_tags if t), PUBLIC_TAG}))
    none_of = () if cite_needs_review else ((KNOWLEDGE_STATUS, (NEEDS_REVIEW,)),)
    return Conditions(equals=(("tenant_id", tenant_id),), any_of=(("tags", allowed),), none_of=none_of)


def scope_conditions(*, document_id: str | None = None, tenant_id: str | None = None) -> Conditions:
    """Which points a count or delete touches (not an access rule: maintenance sees every point)."""
    equals = tuple((key, value) for key, value in (("document_id", document_id), ("tenant_id", tenant_id)) if value)
    return Conditions(equals=equals)


def allowed(payload: dict[str, Any], conditions: Conditions) -> bool:
    """Defence in depth: the engine filtered already; re-check so a mismatch can never leak."""
    equals_ok = all(payload.get(key) == value for key, value in conditions.equals)
    any_ok = all(set(_values(payload.get(key))) & set(values) for key, values in conditions.any_of)
    none_ok = not any(set(_values(payload.get(key))) & set(values) for key, values in conditions.none_of)
    return equals_ok and any_ok and none_ok


def _values(value: Any) -> tuple[Any, ...]:
    """A payload value as Qdrant matches it: a list matches by any element, a scalar by itself."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)
