"""Who gets a question the system could not answer with confidence: the one home of that rule
(docs/specs/rag-service-spec-v3-FINAL.md §Tag Owner Lookup).

The core never touches the database: the app passes `owner_lookup`, an async callable
(tag, tenant_id) -> TagOwner | None, or, where it already holds the tag's row, the TagOwner itself
to `route_target()`. Every missing link falls back to the admin.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from .types import RouteTarget, SearchResult, TagOwner
from .vector_store.access import PUBLIC_TAG

logger = logging.getLogger(__name__)

OwnerLookup = Callable[[str, str], Awaitable[TagOwner | None]]

SYSTEM_TAG = "system"


def admin_fallback(reason: str, *, admin_email: str) -> RouteTarget:
    """Return admin as fallback route target."""
    return RouteTarget(
        tag=SYSTEM_TAG,
        owner_user_id=None,
        owner_email=admin_email,
        reason=f"{reason} - routing to admin",
        fallback=True,
    )


def primary_tag(context_results: Sequence[SearchResult]) -> str | None:
    """Most common non-public tag; a tie goes to the tag seen first (results are best-first)."""
    tag_counts: dict[str, int] = {}
    for result in context_results:
        for tag in result.tags or []:
            if tag != PUBLIC_TAG:
                tag_counts[tag] = tag_counts.get(tag, 0) + 1
    if not tag_counts:
        return None
    # max() returns the first maximal key, and dicts keep insertion order: first occurrence wins.
    return max(tag_counts, key=lambda t: tag_counts[t])


def route_target(
    *,
    tag: str | None,
    owner: TagOwner | None,
    admin_email: str,
    confidence: int | None = None,
    reason_prefix: str = "",
    why: str | None = None,
) -> RouteTarget:
    """The tag's owner if the tag has one with an email; the admin otherwise, saying which link is
    missing. With `confidence` the owner route's reason reads "Low confidence: 45% - routing to hr
    owner", with `why` "<why> - routing to hr owner"; `reason_prefix` leads every reason (the app's
    "Asked the owner: ")."""
    if tag is None:
        return admin_fallback(f"{reason_prefix}No specific tags in context", admin_email=admin_email)
    if owner is None or not owner.user_id:
        return admin_fallback(f"{reason_prefix}No owner for tag '{tag}'", admin_email=admin_email)
    if not owner.email:
        return admin_fallback(f"{reason_prefix}Owner not found for tag '{tag}'", admin_email=admin_email)
    if why:
        reason = f"{why} - routing to {tag} owner"
    elif confidence is not None:
        reason = f"Low confidence: {confidence}% - routing to {tag} owner"
    else:
        reason = f"Routing to {tag} owner"
    return RouteTarget(
        tag=tag,
        owner_user_id=str(owner.user_id),
        owner_email=owner.email,
        reason=reason_prefix + reason,
        fallback=False,
    )


async def get_route_target(
    context_results: Sequence[SearchResult],
    *,
    owner_lookup: OwnerLookup | None,
    admin_email: str,
    tenant_id: str = "default",
    confidence: int | None = None,
    why: str | None = None,
) -> RouteTarget:
    """Context tags -> primary tag -> its owner (looked up) -> `route_target()`."""
    if not context_results:
        return admin_fallback("No context available", admin_email=admin_email)

    tag = primary_tag(context_results)
    owner: TagOwner | None = None
    if tag is not None and owner_lookup is not None:
        try:
            owner = await owner_lookup(tag, tenant_id)
        except Exception as e:  # a failed lookup must not lose the question: the admin gets it
            logger.exception("tag owner lookup failed for %s", tag, extra={"event": "owner_lookup_failed", "tag": tag})
            return admin_fallback(f"Owner lookup failed for tag '{tag}' ({type(e).__name__})", admin_email=admin_email)
    return route_target(tag=tag, owner=owner, admin_email=admin_email, confidence=confidence, why=why)
