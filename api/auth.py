"""Bearer-token authentication and per-token rate limits for the API.

Rate limits use django-ratelimit's counter (`django_ratelimit.core.get_usage`: fixed windows kept in
Django's cache, an atomic add/incr). The cache is LocMem in the embedded mode (one process) and
Redis when REDIS_URL is set (ragchat/settings.py CACHES), so every process counts against the same
window. Over the limit: 429 with Retry-After (seconds to the window's end).
"""

from __future__ import annotations

from django.conf import settings
from django_ratelimit.core import get_usage
from ninja.security import HttpBearer

from access import policy
from api import services
from api.errors import ApiError


def rate_check(request, *, token, group: str, rate: str) -> None:
    usage = get_usage(request, group=group, key=lambda _g, _r: token.key_id, rate=rate, increment=True)
    if usage and usage["should_limit"]:
        retry = max(1, int(usage["time_left"]))
        raise ApiError(
            429,
            "rate_limited",
            f"Too many requests for this token ({rate}); try again in {retry} s.",
            headers={"Retry-After": str(retry)},
        )


class TokenAuth(HttpBearer):
    """`Authorization: Bearer rct_…`. Returns the token (request.auth); request.user becomes its
    person. Unknown, revoked and expired tokens, and inactive accounts, are all a 401."""

    def authenticate(self, request, token: str):
        found = services.token_lookup(token.strip())
        user = policy.token_user(found)
        if found is None or user is None:
            return None
        rate_check(request, token=found, group="api", rate=settings.RAGCHAT_API_RATE)
        services.token_touch(found)
        request.user = user
        return found


def require_scope(request, scope: str) -> None:
    if not policy.token_may(token=request.auth, scope=scope):
        raise ApiError(403, "scope_missing", f"This token lacks the “{scope}” scope.")
