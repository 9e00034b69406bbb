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
from typing import Any

log = logging.getLogger("loom.tasks")


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


async def stop_task(task: asyncio.Task[Any] | None, timeout: float = 5.0) -> None:
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), timeout)
    if not task.done():
        log.warning("background task %s did not stop within %gs", task.get_name(), timeout)
