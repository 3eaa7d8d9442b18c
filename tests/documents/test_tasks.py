"""Where an enqueued ingestion runs: a sync view served over ASGI hands it to the serving loop."""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async

from documents import tasks
from documents.recovery import recover_on_first_call


async def test_a_sync_view_under_asgi_finds_the_loop_serving_it():
    seen = {}

    def sync_view():  # Django runs sync views in a worker thread, away from the loop
        seen["loop"] = tasks._server_loop()

    async def inner(scope, receive, send):
        await sync_to_async(sync_view)()

    # "lifespan": the wrapper notes the loop on every call; recovery itself only runs for http/websocket.
    await recover_on_first_call(inner)({"type": "lifespan"}, None, None)
    assert seen["loop"] is asyncio.get_running_loop()


def test_outside_a_server_there_is_no_loop_to_hand_work_to():
    assert tasks._server_loop() is None
