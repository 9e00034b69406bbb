"""The ``/api/ws`` protocol: topic subscriptions with filters over one project's events.

Client -> server (JSON text frames)::

    {"type": "subscribe", "topic": "work", "filters": {"work_id": "..."}, "id": "optional"}
    {"type": "unsubscribe", "id": "..."}            # or {"type": "unsubscribe", "topic": "work"}
    {"type": "ping"}                                # answered with {"type": "pong"}

Server -> client::

    {"type": "welcome", "project_id": ..., "topics": [...], "subscriptions": [...]}
    {"type": "subscribed", "id": ..., "topic": ..., "filters": {...}}
    {"type": "event", "topic": "work", "subscriptions": [ids], "seq": n, "event": {Event}}
    {"type": "stats", "subscription": id, "stats": {Stats}}
    {"type": "lagged", "dropped": n}                # this client was too slow; n events skipped
    {"type": "ping"} / {"type": "pong"}
    {"type": "error", "error": code, "message": ...}
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from shared.errors import Invalid, shown_name
from shared.redact import redact
from shared.tasks import raise_if_cancelling, stop_task, tick
from weft.project.hub import ProjectContext
from weft.project.relay import Listener, RelayedEvent
from weft.state import WeftState
from weft.stats import project_stats

log = logging.getLogger("loom.weft.ws")

TOPIC_KINDS: dict[str, frozenset[str]] = {
    "work": frozenset({"work"}),
    "agents": frozenset({"agent"}),
    "targets": frozenset({"target", "spinup"}),
    "questions": frozenset({"question"}),
    "contexts": frozenset({"context"}),
    "leases": frozenset({"lease"}),
    "project": frozenset({"project"}),
    "stats": frozenset(),
}
KIND_TOPIC = {kind: topic for topic, kinds in TOPIC_KINDS.items() for kind in kinds}
FILTERS: dict[str, frozenset[str]] = {
    "work": frozenset({"work_id", "task_id", "capability", "status", "boundary", "agent_id", "action"}),
    "agents": frozenset({"agent_id", "agent_type", "status", "capability", "action"}),
    "targets": frozenset({"target_id", "name", "mechanism", "action"}),
    "questions": frozenset({"question_id", "work_id", "status", "agent_id", "action"}),
    "contexts": frozenset({"tree_id", "kind", "author", "action"}),
    "leases": frozenset({"lease_id", "work_id", "agent_id", "action"}),
    "project": frozenset({"action"}),
    "stats": frozenset({"interval_s"}),
}
DEFAULT_STATS_INTERVAL_S = 5.0
MAX_SUBSCRIPTIONS = 32


class ProtocolError(Invalid, ValueError):
    """A client message or connect parameter we cannot act on; the message says why."""


def _values(raw: object, key: str) -> frozenset[str]:
    if isinstance(raw, str):
        parts = [p.strip() for p in raw.split(",") if p.strip()]
    elif isinstance(raw, list) and all(isinstance(v, str) for v in raw):
        parts = list(raw)
    else:
        raise ProtocolError(f"filters.{key}: must be a string or a list of strings")
    if not parts:
        raise ProtocolError(f"filters.{key}: must not be empty")
    return frozenset(parts)


@dataclass
class Subscription:
    id: str
    topic: str
    filters: dict[str, frozenset[str]] = field(default_factory=dict)
    interval_s: float = DEFAULT_STATS_INTERVAL_S

    @classmethod
    def parse(cls, sub_id: str, topic: object, filters: object) -> Subscription:
        if not isinstance(topic, str) or topic not in TOPIC_KINDS:
            raise ProtocolError(f"topic: must be one of {', '.join(TOPIC_KINDS)}")
        if filters is None:
            filters = {}
        if not isinstance(filters, Mapping):
            raise ProtocolError("filters: must be an object")
        unknown = sorted(set(filters) - FILTERS[topic])
        if unknown:
            allowed = ", ".join(sorted(FILTERS[topic]))
            raise ProtocolError(
                f"filters.{shown_name(unknown[0])}: not a filter of topic {topic!r} (allowed: {allowed})"
            )
        sub = cls(id=sub_id, topic=topic)
        for key, raw in filters.items():
            if key == "interval_s":
                try:
                    interval = float(raw)
                except (TypeError, ValueError):
                    raise ProtocolError("filters.interval_s: must be a number of seconds") from None
                if not 1 <= interval <= 3600:
                    raise ProtocolError("filters.interval_s: must be between 1 and 3600")
                sub.interval_s = interval
            else:
                sub.filters[key] = _values(raw, key)
        return sub

    def describe(self) -> dict[str, Any]:
        shown: dict[str, Any] = {k: sorted(v) for k, v in self.filters.items()}
        if self.topic == "stats":
            shown["interval_s"] = self.interval_s
        return {"id": self.id, "topic": self.topic, "filters": shown}

    def matches(self, relayed: RelayedEvent) -> bool:
        if KIND_TOPIC.get(relayed.kind) != self.topic:
            return False
        return all(_field_matches(relayed, key, wanted) for key, wanted in self.filters.items())


def _dicts(data: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    yield data
    for key in ("item", "agent", "target", "operation", "question", "node", "lease"):
        inner = data.get(key)
        if isinstance(inner, Mapping):
            yield inner


def _field_matches(relayed: RelayedEvent, key: str, wanted: frozenset[str]) -> bool:
    event = relayed.event
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    if key == "action":
        return relayed.action in wanted
    if (
        key in ("work_id", "agent_id", "target_id", "question_id", "lease_id")
        and _subject_key(relayed.kind) == key
    ):
        if event.get("subject_id") in wanted:
            return True
        if key != "agent_id":
            return False
    if key == "agent_id" and relayed.kind == "work":
        item = data.get("item") if isinstance(data.get("item"), Mapping) else {}
        assert isinstance(item, Mapping)
        return data.get("agent_id") in wanted or item.get("assigned_to") in wanted
    if key == "status" and relayed.kind == "agent":
        return data.get("status") in wanted
    if key == "agent_id" and relayed.kind == "question":
        question = data.get("question") if isinstance(data.get("question"), Mapping) else {}
        assert isinstance(question, Mapping)
        return question.get("asked_by") in wanted
    if key == "agent_id" and relayed.kind == "lease":
        lease = data.get("lease") if isinstance(data.get("lease"), Mapping) else {}
        assert isinstance(lease, Mapping)
        return lease.get("holder") in wanted
    if key == "capability":
        for source in _dicts(data):
            if source.get("capability") in wanted:
                return True
            caps = source.get("capabilities")
            if isinstance(caps, list) and wanted.intersection(c for c in caps if isinstance(c, str)):
                return True
        return False
    if key == "name":
        return any(
            source.get("name") in wanted or source.get("target_name") in wanted for source in _dicts(data)
        )
    for source in _dicts(data):
        value = source.get(key)
        if isinstance(value, str) and value in wanted:
            return True
    return False


def _subject_key(kind: str) -> str:
    return {
        "work": "work_id",
        "agent": "agent_id",
        "target": "target_id",
        "spinup": "spinup_id",
        "question": "question_id",
        "lease": "lease_id",
    }.get(kind, "")


def subscriptions_from_query(params: Mapping[str, str]) -> list[Subscription]:
    """Connect-time subscriptions: ``?topics=work,agents&work_id=...`` (filters apply where allowed)."""
    raw = params.get("topics") or params.get("topic")
    if not raw:
        return []
    topics = [t.strip() for t in raw.split(",") if t.strip()]
    filter_keys = {k for k in params if k not in ("topics", "topic", "token", "project")}
    subs: list[Subscription] = []
    for index, topic in enumerate(dict.fromkeys(topics)):
        if topic not in TOPIC_KINDS:
            raise ProtocolError(f"topics: each must be one of {', '.join(TOPIC_KINDS)}")
        applicable = {k: params[k] for k in filter_keys if k in FILTERS[topic]}
        subs.append(Subscription.parse(f"q{index}", topic, applicable))
    unused = sorted(filter_keys - set().union(*(FILTERS[s.topic] for s in subs)))
    if unused:
        raise ProtocolError(f"{shown_name(unused[0])}: not a filter of the requested topics")
    return subs


class Session:
    """One connected client: its subscriptions, the relay listener, pings and stats."""

    def __init__(self, ws: WebSocket, state: WeftState, project: ProjectContext) -> None:
        self.ws = ws
        self.state = state
        self.project = project
        self.subs: dict[str, Subscription] = {}
        self._ids = count(1)
        self._stats_tasks: dict[str, asyncio.Task[None]] = {}
        self._send_lock = asyncio.Lock()
        self._listener: Listener = project.relay.listen(self._wants)
        self._reported_drops = 0

    def _wants(self, kind: str) -> bool:
        topic = KIND_TOPIC.get(kind)
        return any(s.topic == topic for s in self.subs.values())

    async def send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.ws.send_text(json.dumps(message, separators=(",", ":"), default=str))

    async def run(self, initial: list[Subscription]) -> None:
        for sub in initial:
            self._add(sub)
        await self.send(
            {
                "type": "welcome",
                "project_id": self.project.project_id,
                "topics": list(TOPIC_KINDS),
                "subscriptions": [s.describe() for s in self.subs.values()],
            }
        )
        tasks = [
            asyncio.create_task(self._read(), name="ws-read"),
            asyncio.create_task(self._deliver(), name="ws-deliver"),
            asyncio.create_task(self._ping(), name="ws-ping"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    exc = task.exception()
                    if not isinstance(exc, WebSocketDisconnect | RuntimeError):
                        log.warning("WebSocket session ended with an error: %s", exc)
        finally:
            self.project.relay.unlisten(self._listener)
            for task in [*tasks, *self._stats_tasks.values()]:
                await stop_task(task)

    def _add(self, sub: Subscription) -> None:
        if len(self.subs) >= MAX_SUBSCRIPTIONS and sub.id not in self.subs:
            raise ProtocolError(f"at most {MAX_SUBSCRIPTIONS} subscriptions per connection")
        self._drop(sub.id)
        self.subs[sub.id] = sub
        if sub.topic == "stats":
            self._stats_tasks[sub.id] = asyncio.create_task(self._stats(sub), name=f"ws-stats:{sub.id}")

    def _drop(self, sub_id: str) -> bool:
        task = self._stats_tasks.pop(sub_id, None)
        if task is not None:
            task.cancel()
        return self.subs.pop(sub_id, None) is not None

    async def _read(self) -> None:
        while True:
            text = await self.ws.receive_text()
            try:
                await self._handle(text)
            except ProtocolError as exc:
                await self.send({"type": "error", "error": exc.code, "message": redact(exc.message)})

    async def _handle(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            raise ProtocolError("message: not JSON") from None
        if not isinstance(message, dict):
            raise ProtocolError("message: must be a JSON object with a 'type'")
        kind = message.get("type")
        if kind == "ping":
            await self.send({"type": "pong"})
        elif kind == "pong":
            return
        elif kind == "subscribe":
            raw_id = message.get("id")
            if raw_id is not None and (not isinstance(raw_id, str) or not 1 <= len(raw_id) <= 64):
                raise ProtocolError("id: must be a string of 1-64 characters")
            sub = Subscription.parse(
                raw_id or f"s{next(self._ids)}", message.get("topic"), message.get("filters")
            )
            self._add(sub)
            await self.send({"type": "subscribed", **sub.describe()})
        elif kind == "unsubscribe":
            await self._unsubscribe(message)
        else:
            raise ProtocolError("type: must be one of subscribe, unsubscribe, ping, pong")

    async def _unsubscribe(self, message: dict[str, Any]) -> None:
        if isinstance(message.get("id"), str):
            ids = [message["id"]] if message["id"] in self.subs else []
        elif isinstance(message.get("topic"), str):
            ids = [s.id for s in self.subs.values() if s.topic == message["topic"]]
        else:
            raise ProtocolError("unsubscribe: give the subscription 'id' or a 'topic'")
        if not ids:
            raise ProtocolError("unsubscribe: no such subscription")
        for sub_id in ids:
            self._drop(sub_id)
        await self.send({"type": "unsubscribed", "ids": ids})

    async def _deliver(self) -> None:
        while True:
            relayed = await self._listener.queue.get()
            if self._listener.dropped > self._reported_drops:
                await self.send({"type": "lagged", "dropped": self._listener.dropped - self._reported_drops})
                self._reported_drops = self._listener.dropped
            matching = [s.id for s in self.subs.values() if s.matches(relayed)]
            if matching:
                await self.send(
                    {
                        "type": "event",
                        "topic": KIND_TOPIC[relayed.kind],
                        "subscriptions": matching,
                        "seq": relayed.seq,
                        "event": relayed.event,
                    }
                )

    async def _ping(self) -> None:
        while True:
            await tick(self.state.settings.ws_ping_interval_s)
            await self.send({"type": "ping"})

    async def _stats(self, sub: Subscription) -> None:
        while True:
            try:
                stats = await project_stats(self.project, self.state.spinup)
                await self.send(
                    {"type": "stats", "subscription": sub.id, "stats": stats.model_dump(mode="json")}
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise_if_cancelling()
                log.info("stats for a WebSocket client failed: %s", exc)
            await tick(sub.interval_s)
