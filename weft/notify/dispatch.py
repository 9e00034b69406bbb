"""Notifications that reach a person (docs/operator.md, Notifications): each event that
makes a notice (:func:`weft.notify.rules.notice_of`) goes to every sink that wants it.

Every Weft replica pulls the project's events from one durable consumer
(``notify-<project>``, :class:`~weft.project.shared_events.SharedEventConsumer`), so each
event is handled by one replica; a notice is sent to a
sink at most once within the dedupe window and within the sink's rate, both marked in a
bucket every replica shares (:class:`~weft.notify.store.SinkStore`). Each sink sends
from a queue of its own, each send with a timeout: a slow or dead sink is recorded (its
status, the ``weft_notifications_total`` metric, the console) and delays only itself,
never the other sinks, the events or anything else; a sink :data:`SINK_BACKLOG` notices
behind has the next ones dropped (``outcome="dropped"``).

**Per project** (:class:`ProjectNotify`): attached to each served project like A2A push;
its dispatcher starts when the project has sinks (at serve time, when an operator sets
one, or on a sweep that finds one another replica set).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from datetime import datetime
from typing import Final

import httpx
from nats.js import JetStreamContext

from shared.models import utcnow
from shared.names import ProjectNames
from shared.redact import redact
from shared.tasks import raise_if_cancelling, stop_task
from shared.tls import default_tls
from weft.metrics import Metrics
from weft.notify.rules import Notice, Sink, notice_of, wants
from weft.notify.send import SEND_TIMEOUT_S, deliver
from weft.notify.store import SinkStore
from weft.project.hub import Attach, ProjectContext, StartedOnUse
from weft.project.shared_events import SharedEventConsumer

log = logging.getLogger("loom.weft.notify")

NOTIFY_EXTENSION: Final = "notify"
SINK_BACKLOG: Final = 1000
"""Notices waiting for one sink; past that the sink is dead and new ones are dropped for it."""
SINKS_FRESH_S: Final = 2.0
"""How long the dispatcher reuses its read of the sinks (a change reaches it within this)."""
EVENTS: Final = (
    ("question", "asked"),
    ("question", "reminded"),
    ("work", "dead-lettered"),
    ("work", "landing-failed"),
    ("work", "bottleneck"),
    ("work", "silent"),
    ("target", "tripped"),
    ("project", "budget-held"),
)
"""The events that can make a notice (the consumer's filter)."""


class NotifyDispatcher:
    """Sends each notice to the sinks that want it (one replica per event, see the module doc)."""

    def __init__(
        self,
        js: JetStreamContext,
        names: ProjectNames,
        store: SinkStore,
        metrics: Metrics,
        *,
        public_url: str | None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.names = names
        self.store = store
        self.metrics = metrics
        self.public_url = public_url
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(timeout=SEND_TIMEOUT_S, verify=default_tls())
        self._events = SharedEventConsumer(
            js,
            names,
            durable=names.notify_consumer,
            subjects=[names.event_subject(kind, action) for kind, action in EVENTS],
            handle=self.handle,
            what="notifications",
        )
        self._sinks: list[Sink] = []
        self._sinks_at = 0.0
        self._lanes: dict[
            str, tuple[asyncio.Queue[tuple[Sink, Notice, datetime | None]], asyncio.Task[None]]
        ] = {}

    async def start(self) -> None:
        await self._events.start()

    async def stop(self) -> None:
        await self._events.stop()
        for _, lane in self._lanes.values():
            await stop_task(lane)
        self._lanes.clear()
        if self._own_http:
            with contextlib.suppress(Exception):
                await self.http.aclose()

    async def _current_sinks(self) -> list[Sink]:
        if time.monotonic() - self._sinks_at > SINKS_FRESH_S:
            self._sinks = await self.store.sinks()
            self._sinks_at = time.monotonic()
        return self._sinks

    async def handle(self, data: bytes) -> int:
        """Queue the notice an event makes for every sink that wants it (each sink sends from
        its own queue); for how many."""
        try:
            event = json.loads(data)
        except ValueError:
            return 0
        notice = notice_of(event, self.public_url)
        if notice is None:
            return 0
        sinks = [sink for sink in await self._current_sinks() if wants(sink, notice)]
        started = _event_time(event)
        queued = 0
        for sink in sinks:
            try:
                self._lane(sink.name).put_nowait((sink, notice, started))
                queued += 1
            except asyncio.QueueFull:  # a sink this far behind is dead: the record keeps the notice
                self.metrics.notifications.labels(self.names.project_id, sink.name, "dropped").inc()
        return queued

    def forget_sinks(self) -> None:
        """Read the sinks again before the next notice (this replica changed them)."""
        self._sinks_at = 0.0

    def _lane(self, name: str) -> asyncio.Queue[tuple[Sink, Notice, datetime | None]]:
        """The sink's own queue and sender, so a slow or dead sink delays only itself."""
        lane = self._lanes.get(name)
        if lane is None:
            queue: asyncio.Queue[tuple[Sink, Notice, datetime | None]] = asyncio.Queue(maxsize=SINK_BACKLOG)
            task = asyncio.create_task(
                self._drain(name, queue), name=f"notify:{self.names.project_id}:{name}"
            )
            lane = self._lanes[name] = (queue, task)
        return lane[0]

    async def _drain(self, name: str, queue: asyncio.Queue[tuple[Sink, Notice, datetime | None]]) -> None:
        while True:
            sink, notice, started = await queue.get()
            try:
                await self._send(sink, notice, started)
            except Exception as exc:  # NATS unreachable for the marks: this notice is lost, not the lane
                raise_if_cancelling()
                log.warning("notification sink %s: a notice was not sent (%s)", name, redact(exc))
            finally:
                queue.task_done()

    async def settle(self) -> None:
        """Until every notice queued so far was sent, refused or dropped (tests, benches)."""
        for queue, _ in list(self._lanes.values()):
            await queue.join()

    async def _send(self, sink: Sink, notice: Notice, started: datetime | None) -> bool:
        project = self.names.project_id
        if not await self.store.first_send(sink.name, notice.key):
            self.metrics.notifications.labels(project, sink.name, "duplicate").inc()
            return False
        if not await self.store.take_rate(sink.name, sink.rate_per_minute):
            self.metrics.notifications.labels(project, sink.name, "rate_limited").inc()
            return False
        now = utcnow()
        error = await deliver(sink, notice, self.http, now)
        self.metrics.notifications.labels(project, sink.name, "failed" if error else "sent").inc()
        if error is None and started is not None:
            self.metrics.notification_latency.labels(project).observe(
                max(0.0, (utcnow() - started).total_seconds())
            )
        if error is not None:
            log.warning("notification sink %s of project %s failed: %s", sink.name, project, error)
        try:
            await self.store.record(sink.name, error)
        except Exception as exc:
            raise_if_cancelling()
            log.warning("notification sink %s: its status was not recorded (%s)", sink.name, redact(exc))
        return error is None


def _event_time(event: dict[str, object]) -> datetime | None:
    """When the event was published (``Event.at``)."""
    at = event.get("at")
    try:
        return datetime.fromisoformat(at) if isinstance(at, str) else None
    except ValueError:
        return None


class ProjectNotify(StartedOnUse[NotifyDispatcher]):
    """One served project's notifications, attached to its context: the dispatcher starts
    once the project has a sink, so a project without any runs none. Sends are best-effort:
    notices still queued for a sink when the project stops being served here are not sent."""

    def __init__(self, project: ProjectContext, *, public_url: str | None) -> None:
        super().__init__()
        self.project = project
        self.store = SinkStore(project.js, project.names)
        self.public_url = public_url

    async def in_use(self) -> bool:
        """Whether an operator ever set a sink in this project."""
        return await self.store.in_use()

    def make(self) -> NotifyDispatcher:
        return NotifyDispatcher(
            self.project.js, self.project.names, self.store, self.project.metrics, public_url=self.public_url
        )


def notify_attach(*, public_url: str | None) -> Attach:
    """The hook that attaches :class:`ProjectNotify` to each project Weft serves."""

    async def attach(project: ProjectContext) -> ProjectNotify:
        part = ProjectNotify(project, public_url=public_url)
        await part.start_if_in_use()
        return part

    return attach


def notify_of(project: ProjectContext) -> ProjectNotify:
    part = project.extension(NOTIFY_EXTENSION, ProjectNotify)
    if part is None:
        raise RuntimeError("notifications are not attached to this project (create_app attaches them)")
    return part
