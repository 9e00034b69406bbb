"""Background-task hygiene.

nats-py turns a cancellation that lands inside some of its calls into an
ordinary exception (a publish waiting for its flow-control slot raises
``TooManyStalledMsgsError``), so a loop that logs and carries on after an
``Exception`` could never be stopped. Loops call :func:`raise_if_cancelling`
in their handlers, and :func:`stop_task` never waits forever.
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


async def stop_task(task: asyncio.Task[Any] | None, timeout: float = 5.0) -> None:
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), timeout)
    if not task.done():
        log.warning("background task %s did not stop within %gs", task.get_name(), timeout)
