"""Follows one project's events stream and fans events out to WebSocket clients, A2A
streams and metrics.

One ordered consumer per served project (it survives reconnects by resuming
after the last event it saw); listeners get each event once, in stream order.
A listener for one subject (an A2A stream follows one work item) is kept in an
index by subject id, so thousands of open task streams cost one dictionary
lookup per event, not one check each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from shared.context.trees import DELETION, RESTORE
from shared.names import ProjectNames
from weft.metrics import Metrics

log = logging.getLogger("loom.weft.relay")

LISTENER_QUEUE = 1000


@dataclass
class RelayedEvent:
    kind: str
    action: str
    seq: int
    event: dict[str, Any]


@dataclass(eq=False)
class Listener:
    """A bounded queue of events; when a slow client lets it fill, the oldest are dropped and counted."""

    accepts: Callable[[str], bool]
    queue: asyncio.Queue[RelayedEvent] = field(default_factory=lambda: asyncio.Queue(LISTENER_QUEUE))
    dropped: int = 0
    subject_id: str | None = None

    def offer(self, event: RelayedEvent) -> None:
        if not self.accepts(event.kind):
            return
        while True:
            try:
                self.queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                with contextlib.suppress(asyncio.QueueEmpty):
                    self.queue.get_nowait()
                    self.dropped += 1


class EventRelay:
    def __init__(self, js: JetStreamContext, names: ProjectNames, metrics: Metrics) -> None:
        self._js = js
        self.names = names
        self._metrics = metrics
        self._listeners: set[Listener] = set()
        self._by_subject: dict[str, set[Listener]] = {}
        self._sub: Any = None
        self._contexts: Any = None
        self._prefix = f"{names.events_subjects[:-1]}"

    async def start(self) -> None:
        self._sub = await self._js.subscribe(
            self.names.events_subjects,
            stream=self.names.events_stream,
            cb=self._on_message,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW,
        )
        # Context trees are their own change log: each stored node is relayed as a
        # ``context.<action>`` event (topic ``contexts``), in the context stream's order.
        self._contexts = await self._js.subscribe(
            self.names.context_subjects,
            stream=self.names.context_stream,
            cb=self._on_node,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW,
        )

    async def stop(self) -> None:
        for sub in (self._sub, self._contexts):
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        self._sub = self._contexts = None

    async def _on_node(self, msg: Msg) -> None:
        if not self._listeners:
            return
        try:
            node = json.loads(msg.data)
            action = context_action(node)
            event = {
                "id": node["id"],
                "kind": "context",
                "action": action,
                "project_id": self.names.project_id,
                "subject_id": node["tree_id"],
                "at": node.get("at"),
                "data": {"node": node},
            }
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable context node on %s", msg.subject)
            return
        seq = int(msg.metadata.sequence.stream) if msg.metadata else 0
        relayed = RelayedEvent(kind="context", action=action, seq=seq, event=event)
        for listener in list(self._listeners):
            listener.offer(relayed)

    def listen(self, accepts: Callable[[str], bool], *, subject_id: str | None = None) -> Listener:
        """Events of the kinds ``accepts`` takes; with ``subject_id``, only that subject's."""
        listener = Listener(accepts)
        if subject_id is None:
            self._listeners.add(listener)
        else:
            listener.subject_id = subject_id
            self._by_subject.setdefault(subject_id, set()).add(listener)
        return listener

    def unlisten(self, listener: Listener) -> None:
        self._listeners.discard(listener)
        if listener.subject_id is not None:
            same = self._by_subject.get(listener.subject_id)
            if same is not None:
                same.discard(listener)
                if not same:
                    del self._by_subject[listener.subject_id]

    @property
    def listening(self) -> int:
        """Listeners now attached (WebSocket clients and A2A streams)."""
        return len(self._listeners) + sum(len(same) for same in self._by_subject.values())

    async def _on_message(self, msg: Msg) -> None:
        tail = msg.subject[len(self._prefix) :] if msg.subject.startswith(self._prefix) else ""
        kind, _, action = tail.partition(".")
        if not kind:
            return
        self._metrics.observe_event(self.names.project_id, kind, action)
        landing = kind == "work" and action in ("landed", "landing-failed")
        if not self._listeners and not self._by_subject and not landing:
            return
        try:
            event = json.loads(msg.data)
        except ValueError:
            log.warning("unreadable event on %s", msg.subject)
            return
        if landing:
            data = event.get("data") or {}
            outcome = "landed" if action == "landed" else str(data.get("outcome", "failed"))
            project = self.names.project_id
            self._metrics.observe_landing(
                project, outcome, data.get("batch"), data.get("gate_s"), data.get("splits")
            )
            if not self._listeners and not self._by_subject:
                return
        seq = int(msg.metadata.sequence.stream) if msg.metadata else 0
        relayed = RelayedEvent(kind=kind, action=action, seq=seq, event=event)
        for listener in list(self._listeners):
            listener.offer(relayed)
        subject = event.get("subject_id") if isinstance(event, dict) else None
        if isinstance(subject, str):
            for listener in list(self._by_subject.get(subject, ())):
                listener.offer(relayed)


def context_action(node: dict[str, Any]) -> str:
    """What a stored node did to its tree: ``created`` (a root), ``tombstoned``,
    ``tree-updated`` (a new version of the root: new metadata), ``updated`` (it supersedes
    another), ``deleting`` / ``restored`` (a deletion scheduled or undone) or ``appended``.
    (``deleted``, when a tree is purged, is an event of its own: no node is left.)"""
    if node.get("target"):
        return "tombstoned"
    if node.get("supersedes"):
        return "tree-updated" if node.get("parent_id") is None else "updated"
    if node.get("kind") == DELETION:
        return "deleting"
    if node.get("kind") == RESTORE:
        return "restored"
    if node.get("parent_id") is None:
        return "created"
    return "appended"
