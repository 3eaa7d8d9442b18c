"""Template context every page needs from the access policy (e.g. whether to show admin links)."""

from access import policy


def access(request):
    return {"is_access_admin": policy.is_admin(getattr(request, "user", None))}
