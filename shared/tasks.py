"""Background-task hygiene.

nats-py turns a cancellation that lands inside some of its calls into an
ordinary exception (a publish waiting for its flow-control slot raises
``TooManyStalledMsgsError``), so a loop that logs and carries on after an
``Exception`` could never be stopped; and on Python 3.11 ``asyncio.wait_for``,
which nats-py's requests wait with, drops a cancellation that arrives as the reply
does, so the call returns as if nothing happened. Loops call
:func:`raise_if_cancelling` in their handlers and pause between rounds with
:func:`tick`, which re-raises a cancellation either way lost, and :func:`stop_task`
never waits forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar, cast

from shared.redact import redact

log = logging.getLogger("loom.tasks")

A = TypeVar("A")
B = TypeVar("B")


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a library turned into an exception."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


async def tick(seconds: float) -> None:
    """The pause between two rounds of a background loop: a cancellation a library lost
    in the round before ends the loop here, not never."""
    raise_if_cancelling()
    await asyncio.sleep(seconds)


async def together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Two independent reads at once, one round trip's wait instead of two. Both run to
    their end before it returns (nothing is left running, no failure goes unretrieved);
    then the first failure, in argument order, is raised as it was."""
    one, two = await asyncio.gather(first, second, return_exceptions=True)
    for outcome in (one, two):
        if isinstance(outcome, BaseException):
            raise outcome
    return cast(A, one), cast(B, two)


async def stop_task(task: asyncio.Task[Any] | None, timeout: float = 5.0) -> None:
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), timeout)
    if not task.done():
        log.warning("background task %s did not stop within %gs", task.get_name(), timeout)


class Background:
    """Tasks started to run on their own. asyncio holds them only weakly, so each is kept
    here until it ends; and a failure is logged under the task's name (redacted) instead of
    surfacing at garbage collection as "Task exception was never retrieved", or never."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._log = logger or log

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            reason = redact(f"{type(exc).__name__}: {exc}")
            self._log.warning("background task %s failed: %s", task.get_name(), reason)

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait(self, timeout: float | None = None) -> None:
        """Wait (up to ``timeout``, or until done) for the tasks running now and any they start."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._tasks:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            await asyncio.wait(set(self._tasks), timeout=left)

    async def close(self, timeout: float = 5.0) -> None:
        """Cancel every task and wait, at most ``timeout`` for all together, for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for task in tasks:
            if not task.done():
                self._log.warning("background task %s did not stop within %gs", task.get_name(), timeout)
