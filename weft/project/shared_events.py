"""One durable consumer of a project's events that every Weft replica pulls from, so each
event is handled by one of them: A2A push (``weft/a2a/push.py``) and the operator's
notifications (``weft/notify/dispatch.py``) each run one.

Delivery is at most a few times (``max_deliver``) and handled best-effort: an event whose
handler fails is logged and acknowledged all the same, so one bad event never stops the
ones after it. A consumer no replica pulled from for a day is removed by the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from shared.names import ProjectNames
from shared.redact import redact
from shared.tasks import raise_if_cancelling, stop_task, tick

log = logging.getLogger("loom.weft.events")

FETCH_BATCH: Final = 64
FETCH_WAIT_S: Final = 1.0
ACK_WAIT_S: Final = 60.0
CONSUMER_IDLE_S: Final = 24 * 3600.0
"""A consumer no replica pulled from for this long is removed by the server."""


class SharedEventConsumer:
    """Pulls ``subjects`` of the project's events stream through the durable ``durable``
    and hands each event's body to ``handle`` (see the module doc)."""

    def __init__(
        self,
        js: JetStreamContext,
        names: ProjectNames,
        *,
        durable: str,
        subjects: Sequence[str],
        handle: Callable[[bytes], Awaitable[object]],
        what: str,
    ) -> None:
        """``what`` names the consumer in the log ("A2A push", "notifications")."""
        self._js = js
        self.names = names
        self.durable = durable
        self.subjects = list(subjects)
        self._handle = handle
        self.what = what
        self._task: asyncio.Task[None] | None = None
        self._subscription: JetStreamContext.PullSubscription | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        if self._task is not None:
            return
        one = len(self.subjects) == 1
        config = ConsumerConfig(
            durable_name=self.durable,
            filter_subject=self.subjects[0] if one else None,
            filter_subjects=None if one else self.subjects,
            deliver_policy=DeliverPolicy.NEW,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT_S,
            max_deliver=3,
            inactive_threshold=CONSUMER_IDLE_S,
        )
        await self._js.add_consumer(self.names.events_stream, config)
        self._subscription = await self._js.pull_subscribe_bind(
            durable=self.durable, stream=self.names.events_stream
        )
        self._task = asyncio.create_task(
            self._run(self._subscription), name=f"{self.durable}:{self.names.project_id}"
        )

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None
        if self._subscription is not None:  # its pending pull ends here, not in the connection's drain
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
            self._subscription = None

    async def _run(self, subscription: JetStreamContext.PullSubscription) -> None:
        while True:
            try:
                messages = await subscription.fetch(FETCH_BATCH, timeout=FETCH_WAIT_S)
            except (TimeoutError, NatsTimeoutError):
                continue
            except Exception as exc:
                raise_if_cancelling()
                log.warning("%s: cannot read the events (%s); trying again", self.what, redact(exc))
                await tick(1)
                continue
            for message in messages:
                try:
                    await self._handle(message.data)
                except Exception as exc:  # one bad event must not stop the others
                    raise_if_cancelling()
                    log.warning("%s: an event was not handled (%s)", self.what, redact(exc))
                with contextlib.suppress(Exception):
                    await message.ack()
