"""shared.tasks: stopping a background task is bounded and says which one would not stop,
and a loop ends on cancel whatever a library did with the cancellation."""

from __future__ import annotations

import asyncio

import pytest

from shared.tasks import stop_task, tick, together


async def test_a_task_that_ends_on_cancel_is_stopped() -> None:
    task = asyncio.create_task(asyncio.sleep(3600), name="sleeper")
    await asyncio.sleep(0)
    await stop_task(task, timeout=5.0)
    assert task.cancelled()


async def test_a_task_that_ignores_cancel_does_not_hang_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:  # what a library that swallows cancellation does
                await release.wait()

    task = asyncio.create_task(stubborn(), name="stubborn-worker")
    await asyncio.sleep(0)
    with caplog.at_level("WARNING"):
        await stop_task(task, timeout=0.2)  # returns although the task is still running
    assert not task.done()
    assert "stubborn-worker did not stop" in caplog.text
    release.set()
    await task


async def test_a_loop_that_logs_errors_still_ends_when_a_library_turns_cancel_into_an_error() -> None:
    from shared.tasks import raise_if_cancelling

    rounds = 0

    async def library_call() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("stalled") from None  # as nats-py does in some of its calls

    async def loop() -> None:
        nonlocal rounds
        while True:
            try:
                await library_call()
            except Exception:
                raise_if_cancelling()
                rounds += 1

    task = asyncio.create_task(loop(), name="ticker")
    await asyncio.sleep(0)
    await stop_task(task, timeout=2.0)
    assert task.cancelled() and rounds == 0


async def test_a_loop_ends_when_a_cancellation_was_lost_as_the_reply_came() -> None:
    """Python 3.11's ``asyncio.wait_for`` (nats-py's requests wait with it) returns the reply
    when the cancel and the reply arrive together, and the caller goes on as if not
    cancelled; :func:`tick` between rounds ends the loop anyway."""
    loop = asyncio.get_running_loop()
    replies: list[asyncio.Future[int]] = []
    rounds = 0

    async def ticker() -> None:
        nonlocal rounds
        while True:
            reply: asyncio.Future[int] = loop.create_future()
            replies.append(reply)
            await asyncio.wait_for(reply, 3600)
            rounds += 1
            await tick(3600)

    task = asyncio.create_task(ticker(), name="renewer")
    await asyncio.sleep(0)  # it waits for its first reply
    assert len(replies) == 1
    replies[0].set_result(1)  # the reply arrives ...
    task.cancel()  # ... as the owner stops the loop
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5.0)
    assert task.cancelled()


async def test_background_logs_a_failure_by_name_without_the_secret(caplog: pytest.LogCaptureFixture) -> None:
    from shared.redact import register_secret
    from shared.tasks import Background

    secret = "bg-secret-password-4711"
    register_secret(secret)

    async def fails() -> None:
        raise TimeoutError(f"nats://loom:{secret}@127.0.0.1 timed out")

    background = Background()
    with caplog.at_level("WARNING", logger="loom.tasks"):
        background.spawn(fails(), name="spinup-link-a1")
        await background.wait(5.0)
    assert len(background) == 0
    assert "background task spinup-link-a1 failed: TimeoutError" in caplog.text
    assert secret not in caplog.text


async def test_background_waits_for_what_its_tasks_start_and_closes_what_is_left() -> None:
    from shared.tasks import Background

    background = Background()
    finished: list[str] = []

    async def second() -> None:
        await asyncio.sleep(0.01)
        finished.append("second")

    async def first() -> None:
        await asyncio.sleep(0.01)
        background.spawn(second(), name="second")
        finished.append("first")

    background.spawn(first(), name="first")
    await background.wait()
    assert finished == ["first", "second"]

    sleeper = background.spawn(asyncio.sleep(3600), name="sleeper")
    await background.wait(0.05)  # gives up at its timeout, the task still runs
    assert not sleeper.done() and len(background) == 1
    await background.close()
    assert sleeper.cancelled() and len(background) == 0


async def test_together_runs_both_at_once_and_returns_both() -> None:
    """The second starts before the first ends: the first waits for what the second sets."""
    started = asyncio.Event()

    async def first() -> str:
        await started.wait()
        return "first"

    async def second() -> int:
        started.set()
        return 2

    assert await asyncio.wait_for(together(first(), second()), 30) == ("first", 2)


async def test_together_lets_both_end_then_raises_the_first_failure_in_order() -> None:
    ended: list[str] = []

    async def fails(name: str, wait: asyncio.Event | None = None, then: asyncio.Event | None = None) -> str:
        if wait is not None:
            await wait.wait()
        ended.append(name)
        if then is not None:
            then.set()
        raise ValueError(name)

    async def ok_later(wait: asyncio.Event) -> str:
        await wait.wait()
        ended.append("ok")
        return "ok"

    gate = asyncio.Event()
    with pytest.raises(ValueError, match=r"^early$"):
        await asyncio.wait_for(together(fails("early", then=gate), ok_later(gate)), 30)
    assert ended == ["early", "ok"]  # the other half ran to its end, not left running

    ended.clear()
    gate = asyncio.Event()
    with pytest.raises(ValueError, match=r"^one$"):  # both failed: the first argument's, failed last
        await asyncio.wait_for(together(fails("one", wait=gate), fails("two", then=gate)), 30)
    assert ended == ["two", "one"]
