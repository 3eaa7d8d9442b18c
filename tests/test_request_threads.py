"""HTTP requests through the real ASGI application run their synchronous part (middleware, view,
database) on a few long-lived threads (ragchat/request_threads.py), not on a thread each: a burst
of page loads cannot take Python's GIL from the event loop that streams the answers."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.testing import HttpCommunicator
from django.core.signals import request_finished

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_burst_of_requests_shares_a_few_threads():
    from ragchat.asgi import application
    from ragchat.request_threads import DEFAULT_THREADS

    names: list[str] = []

    def finished(**kwargs) -> None:  # sent where the request's synchronous work ran
        names.append(threading.current_thread().name)

    request_finished.connect(finished)
    try:
        burst = [
            HttpCommunicator(application, "GET", "/accounts/login/", headers=[(b"host", b"testserver")])
            for _ in range(5 * DEFAULT_THREADS)
        ]
        answers = await asyncio.gather(*(request.get_response(timeout=60) for request in burst))
        for _ in range(100):  # a request finishes (closes its response) just after it is answered
            if len(names) == len(burst):
                break
            await asyncio.sleep(0.05)
    finally:
        request_finished.disconnect(finished)
    assert {answer["status"] for answer in answers} == {200}
    assert len(names) == 5 * DEFAULT_THREADS
    assert set(names) <= {f"http-{i}_0" for i in range(DEFAULT_THREADS)}, sorted(set(names))
