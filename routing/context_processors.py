"""Navigation figures on every page: everything waiting in the owner's inbox (open questions, review
items, verified knowledge that needs review), and the bell's count of what is new for the person:
their unread routed answers and what waits in their inbox (the list it opens: routing:whats_new)."""

from django.utils.functional import SimpleLazyObject

from access import policy
from routing import selectors


def nav_figures(user) -> dict:
    """The figures the navigation shows (pages, and the live badges of ws/nav/ and ws/inbox/)."""
    has_inbox = policy.has_inbox(user=user)
    unread = selectors.unread_answer_count(user=user)
    waiting = selectors.inbox_badge_count(user=user) if has_inbox else 0
    return {"unread_answers": unread, "has_inbox": has_inbox, "inbox_open": waiting, "bell": unread + waiting}


def routing_nav(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"routing_nav": SimpleLazyObject(lambda: nav_figures(user))}
