"""Live pushes from sync code (ragchat.live): handed to the server's loop without waiting for it
from a thread the loop runs sync code in; run to their end where no loop runs (commands, workers)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from ragchat import live

# database_sync_to_async closes the database thread's connection if it is unusable: an earlier test
# may have left that thread's connection open, and pytest-django refuses it to an unmarked test.
pytestmark = pytest.mark.django_db


async def test_a_push_from_the_database_thread_does_not_wait_for_the_loop():
    loop_busy = asyncio.Event()
    delivered: list[str] = []

    async def send(text: str) -> None:
        await loop_busy.wait()  # the loop is busy until the thread has returned
        delivered.append(text)

    def service() -> str:
        live.send_soon(send, "pushed")
        return "returned"

    # async_to_sync would wait here for `send`, which waits for the thread: never done.
    assert await asyncio.wait_for(database_sync_to_async(service)(), 2) == "returned"
    assert delivered == []
    loop_busy.set()
    for _ in range(50):
        if delivered:
            break
        await asyncio.sleep(0.01)
    assert delivered == ["pushed"]


async def test_a_group_push_from_a_thread_reaches_the_group():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("live-test", channel)
    await database_sync_to_async(live.group_send)("live-test", {"type": "x.y", "n": 1})
    assert await asyncio.wait_for(layer.receive(channel), 2) == {"type": "x.y", "n": 1}


def test_without_a_running_loop_the_push_is_done_before_the_call_returns():
    from asgiref.sync import async_to_sync

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("live-test-sync", channel)
    live.group_send("live-test-sync", {"type": "x.y", "n": 2})
    assert async_to_sync(layer.receive)(channel) == {"type": "x.y", "n": 2}


async def test_a_failed_push_is_logged_not_raised(caplog):
    async def broken() -> None:
        raise ConnectionError("redis restarting")

    with caplog.at_level(logging.WARNING, logger="ragchat.live"):
        await database_sync_to_async(live.send_soon)(broken)
        for _ in range(50):
            if "live push failed" in caplog.text:
                break
            await asyncio.sleep(0.01)
    assert "live push failed: redis restarting" in caplog.text
    live.send_soon(broken)  # no loop here: run now, logged the same way


async def test_pushes_to_one_group_arrive_in_the_order_they_were_made(monkeypatch):
    # Over Redis a send takes several awaits, and an earlier push can take longer than a later
    # one; here the first sends are the slowest. Each push is still delivered after the earlier ones.
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("live-order", channel)
    real_send = layer.group_send

    async def slow_first(group, event):
        await asyncio.sleep(0.01 * (5 - event["n"]))
        await real_send(group, event)

    monkeypatch.setattr(layer, "group_send", slow_first)

    def service() -> None:
        for n in range(5):
            live.group_send("live-order", {"type": "x.y", "n": n})

    await database_sync_to_async(service)()
    received = [(await asyncio.wait_for(layer.receive(channel), 2))["n"] for _ in range(5)]
    assert received == [0, 1, 2, 3, 4]
