"""First tokens first (chat.turn_stream.FirstTokens): while questions wait for their first token, an
answer that already streams gives way: once per burst, never longer than GIVE_WAY_MAX_SECONDS."""

from __future__ import annotations

import asyncio
import time

import pytest

from chat import turn_state, turn_stream


def a_turn(name: str) -> turn_state.Turn:
    return turn_state.Turn(session_id=name, message_id=0, question="q")


async def test_an_answer_goes_on_at_once_when_no_question_waits():
    gate = turn_stream.FirstTokens()
    started = time.monotonic()
    await gate.give_way(a_turn("streaming"))
    assert time.monotonic() - started < 0.05


async def test_an_answer_waits_until_the_last_waiting_question_has_its_first_token():
    gate = turn_stream.FirstTokens()
    waiting = [a_turn("q1"), a_turn("q2")]
    for turn in waiting:
        gate.begin(turn)
    gate.begin(waiting[0])  # counted once
    assert gate.waiting == 2
    streaming = a_turn("streaming")
    paused = asyncio.create_task(gate.give_way(streaming))
    await asyncio.sleep(0.02)
    gate.end(waiting[0])
    gate.end(waiting[0])  # ended once
    await asyncio.sleep(0.02)
    assert not paused.done()
    gate.end(waiting[1])
    await asyncio.wait_for(paused, 1)
    assert gate.waiting == 0


async def test_an_answer_gives_way_once_while_the_same_questions_wait():
    gate = turn_stream.FirstTokens()
    gate.begin(a_turn("waits-long"))
    streaming = a_turn("streaming")
    turns_max = turn_stream.GIVE_WAY_MAX_SECONDS
    turn_stream.GIVE_WAY_MAX_SECONDS = 0.05
    try:
        started = time.monotonic()
        await gate.give_way(streaming)  # paused, at most the bound
        paused = time.monotonic() - started
        again = time.monotonic()
        await gate.give_way(streaming)  # the same burst: goes on
        assert 0.04 <= paused < 1 and time.monotonic() - again < 0.02
    finally:
        turn_stream.GIVE_WAY_MAX_SECONDS = turns_max


async def test_a_new_burst_makes_it_give_way_again():
    gate = turn_stream.FirstTokens()
    streaming = a_turn("streaming")
    for burst in range(2):
        question = a_turn(f"q{burst}")
        gate.begin(question)
        paused = asyncio.create_task(gate.give_way(streaming))
        await asyncio.sleep(0.02)
        assert not paused.done(), f"burst {burst}"
        gate.end(question)
        await asyncio.wait_for(paused, 1)


@pytest.mark.parametrize("cancelled", [True, False])
async def test_a_cancelled_pause_leaves_nothing_behind(cancelled):
    gate = turn_stream.FirstTokens()
    question = a_turn("q")
    gate.begin(question)
    paused = asyncio.create_task(gate.give_way(a_turn("streaming")))
    await asyncio.sleep(0.01)
    if cancelled:
        paused.cancel()
        with pytest.raises(asyncio.CancelledError):
            await paused
    gate.end(question)
    if not cancelled:
        await asyncio.wait_for(paused, 1)
    assert gate._state().waiters == []
