"""What this process may do when several processes serve the same data (docs/deploying.md "Scale-out").

The embedded vector store (Qdrant Edge) can be opened by one process only. With a Qdrant server
(QDRANT_URL) every process opens it and runs its own chat turns. Without one, several processes
are still possible: one "holder" opens the embedded store, and the "client" processes never do:
they serve pages and websockets, and hand every chat turn asked on their sockets to the holder
through the Redis channel layer (chat.turn_handover.HANDOFF_CHANNEL); the turn's frames reach every tab of
the session, whichever process holds it, through the session's channel group. The load balancer
sends the other requests that search or change the store (the JSON API, documents, view-as, the
admin, /health) to the holder (scripts/scale/haproxy.cfg).

`process_problems()` lists the settings that cannot work; ragchat/asgi.py refuses to start with
any, and `manage.py check` reports them.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks

OWN = "own"
HOLDER = "holder"
CLIENT = "client"
ROLES = (OWN, HOLDER, CLIENT)


class StoreNotInThisProcess(RuntimeError):
    """A client process was asked to open the embedded store (a request the load balancer should
    have sent to the holder)."""


def store_role() -> str:
    return getattr(settings, "RAGCHAT_STORE_ROLE", OWN)


def several_processes() -> bool:
    """The settings say several processes share the data: a shared channel layer (Redis)."""
    return bool(getattr(settings, "REDIS_URL", ""))


def embedded_store() -> bool:
    return not settings.RAG.qdrant_url


def opens_store() -> bool:
    return store_role() != CLIENT


def holds_handed_turns() -> bool:
    """This process runs the chat turns that client processes hand over."""
    return store_role() == HOLDER


def hands_turns_over() -> bool:
    return store_role() == CLIENT


def process_problems(*, server: bool = True) -> list[str]:
    """Why these settings cannot run several processes safely (empty: they can). `server`: for the
    web server, which holds the embedded store; an ingestion worker (`db_worker`, `ingest_worker`)
    alone may open it when no server runs, e.g. a batch import, so for other commands that rule is a
    warning (`check_processes`)."""
    role = store_role()
    if role not in ROLES:
        return [f"RAGCHAT_STORE_ROLE={role!r}: use one of {', '.join(ROLES)}."]
    problems = []
    if role in (HOLDER, CLIENT) and not several_processes():
        problems.append(
            f"RAGCHAT_STORE_ROLE={role} needs REDIS_URL: chat turns are handed to the holder through the "
            "Redis channel layer."
        )
    if role in (HOLDER, CLIENT) and not embedded_store():
        problems.append(
            f"RAGCHAT_STORE_ROLE={role} is for the embedded store; with QDRANT_URL every process opens the "
            "Qdrant server itself: leave RAGCHAT_STORE_ROLE at own."
        )
    if role == OWN and several_processes() and embedded_store():
        problems.append(
            "REDIS_URL says several processes, but the embedded vector store (no QDRANT_URL) can be opened "
            "by one process only: set QDRANT_URL, or RAGCHAT_STORE_ROLE=holder on exactly one process and "
            "RAGCHAT_STORE_ROLE=client on the others (docs/deploying.md, Scale-out)."
        )
    if server:
        problems += _worker_problems()
    return problems


def _worker_problems() -> list[str]:
    problems = []
    if settings.RAGCHAT_INGEST_BACKEND == "tasks" and embedded_store():
        problems.append(
            "RAGCHAT_INGEST_BACKEND=tasks runs ingestion in db_worker processes, which cannot open the "
            "embedded vector store the server holds: set QDRANT_URL, or keep RAGCHAT_INGEST_BACKEND=inprocess."
        )
    return problems


@checks.register("ragchat")
def check_processes(app_configs, **kwargs) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = [
        checks.Error(text, id="ragchat.E001") for text in process_problems(server=False)
    ]
    return errors + [checks.Warning(text, id="ragchat.W001") for text in _worker_problems()]
