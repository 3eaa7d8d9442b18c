"""ragchat.services.batching.Batcher: the one home of "calls that arrive together share one run"
(query embeddings, chat turn preparation)."""

from __future__ import annotations

import asyncio

import pytest

from ragchat.services.batching import Batcher


async def test_calls_that_arrive_together_share_a_run_and_each_gets_its_own_result():
    runs: list[list[int]] = []

    async def double(items: list[int]) -> list[int]:
        runs.append(items)
        await asyncio.sleep(0.01)
        return [2 * i for i in items]

    batcher: Batcher[int, int] = Batcher(double, max_batch=8)
    assert await batcher.submit(-1) == -2 and runs == [[-1]]  # alone: run at once, by itself
    results = await asyncio.gather(*(batcher.submit(i) for i in range(20)))
    assert results == [2 * i for i in range(20)]
    assert all(len(r) <= 8 for r in runs) and sum(map(len, runs)) == 21 and len(runs) <= 4
    assert batcher.runs == len(runs) and batcher.items == 21


async def test_an_exception_as_a_result_fails_only_its_caller_one_raised_fails_the_run():
    async def picky(items: list[int]) -> list[int | Exception]:
        if 99 in items:
            raise RuntimeError("the whole run failed")
        return [ValueError(f"odd {i}") if i % 2 else i for i in items]

    batcher: Batcher[int, int] = Batcher(picky, max_batch=4)
    assert await batcher.submit(2) == 2
    with pytest.raises(ValueError, match="odd 3"):
        await batcher.submit(3)
    results = await asyncio.gather(batcher.submit(0), batcher.submit(99), return_exceptions=True)
    assert isinstance(results[1], RuntimeError)
    assert await batcher.submit(4) == 4  # the next run works
