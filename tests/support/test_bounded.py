"""testsupport.bounded: a test that passes its bound fails with where every task waited."""

from __future__ import annotations

import asyncio

import pytest

from testsupport.bounded import bounded


async def waits_for_a_reply_that_never_comes(never: asyncio.Event) -> None:
    await never.wait()


async def test_a_test_past_its_bound_says_where_its_tasks_waited() -> None:
    never = asyncio.Event()

    @bounded(0.3)
    async def stuck() -> None:
        helper = asyncio.create_task(waits_for_a_reply_that_never_comes(never), name="the-helper")
        await asyncio.gather(helper)

    with pytest.raises(TimeoutError) as failure:
        await stuck()
    notes = "\n".join(getattr(failure.value, "__notes__", []))
    assert "the-helper:" in notes
    assert "in waits_for_a_reply_that_never_comes" in notes  # the helper's own await, not just its task


async def test_a_test_within_its_bound_returns_what_it_returned() -> None:
    @bounded(5.0)
    async def quick() -> int:
        await asyncio.sleep(0)
        return 7

    assert await quick() == 7
