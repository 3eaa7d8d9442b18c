"""Navigation figures on every page: the asker's unread routed answers, the owner's open questions."""

from django.utils.functional import SimpleLazyObject

from access import policy
from routing import selectors


def routing_nav(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def nav() -> dict:
        has_inbox = policy.has_inbox(user=user)
        return {
            "unread_answers": selectors.unread_answer_count(user=user),
            "has_inbox": has_inbox,
            "inbox_open": selectors.inbox_open_count(user=user) if has_inbox else 0,
        }

    return {"routing_nav": SimpleLazyObject(nav)}
