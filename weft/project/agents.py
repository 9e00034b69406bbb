"""Weft's view of one project's agent registry (written by Warp).

Warp does not publish ``agent.*`` events; Weft derives them from registry
changes (registered, status changes, offline when heartbeats stop,
deregistered). Each derived event carries a message id made of the agent id
and the registry revision, so two Weft replicas that both see a change
publish it once (the events stream drops the duplicate), and the revision of
the entry it carries (``data.revision``), so a reader can tell an older copy of
an agent from a newer one whatever order events reach it in.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.agents.registry import AgentNotFound
from shared.events import publish_event
from shared.models import AgentEntry, AgentStatus, ControlRequest, utcnow
from shared.names import ProjectNames, validate_agent_id
from shared.nats.client import settle
from shared.nats.jetstream import ensure_kv
from shared.nats.mirror import BucketMirror, Slot, model_parser
from shared.paging import CursorError, Page, decode_cursor, encode_cursor
from shared.tasks import raise_if_cancelling, stop_task, tick

log = logging.getLogger("loom.weft.agents")

_PRESENCE_FIELDS = (
    "handle",
    "agent_type",
    "capabilities",
    "boundaries",
    "current_tasks",
    "max_concurrent_tasks",
    "scope",
    "metadata",
)


@dataclass(frozen=True)
class AgentQuery:
    agent_type: str | None = None
    status: AgentStatus | None = None
    capability: str | None = None
    boundary: str | None = None
    handle: str | None = None

    def matches(self, entry: AgentEntry, effective: AgentStatus) -> bool:
        return (
            (self.agent_type is None or entry.agent_type == self.agent_type)
            and (self.status is None or effective == self.status)
            and (self.capability is None or self.capability in entry.capabilities)
            and (self.boundary is None or self.boundary in entry.boundaries)
            and (self.handle is None or entry.handle == self.handle)
        )


@dataclass
class AgentState:
    entry: AgentEntry
    status: AgentStatus
    """Effective status: offline when heartbeats stopped, whatever the entry says."""
    stale: bool
    revision: int
    """The registry revision of ``entry``: of two copies of one agent, the higher is newer."""


class AgentDirectory:
    """Registry mirror + derived agent events + shutdown requests for one project."""

    def __init__(self, nc: NatsClient, js: JetStreamContext, names: ProjectNames) -> None:
        self._nc = nc
        self._js = js
        self.names = names
        self._mirror: BucketMirror[AgentEntry] | None = None
        self._stale_reported: dict[str, int] = {}
        """agent id -> revision whose staleness was already announced."""
        self._task: asyncio.Task[None] | None = None

    async def start(self, stale_check_interval_s: float = 1.0) -> None:
        await ensure_kv(self._js, self.names.registry_bucket, description="Loom agents")
        self._mirror = BucketMirror(
            self._js,
            self.names.registry_bucket,
            model_parser(AgentEntry),
            on_change=self._changed,
            nc=self._nc,
        )
        await self._mirror.start()
        self._task = asyncio.create_task(
            self._watch_staleness(stale_check_interval_s), name=f"stale:{self.names.project_id}"
        )

    async def stop(self) -> None:
        await stop_task(self._task)
        if self._mirror is not None:
            await self._mirror.stop()

    @property
    def mirror(self) -> BucketMirror[AgentEntry]:
        assert self._mirror is not None, "AgentDirectory.start() was not awaited"
        return self._mirror

    # -- reads -----------------------------------------------------------------
    def states(self, now: datetime | None = None) -> list[AgentState]:
        moment = now or utcnow()
        return [self._state(key, entry, moment) for key, entry in self.mirror.items()]

    async def get(self, agent_id: str) -> AgentState:
        validate_agent_id(agent_id)
        await self.mirror.sync()
        entry = self.mirror.get(agent_id)
        if entry is None:
            raise AgentNotFound(agent_id)
        return self._state(agent_id, entry, utcnow())

    def _state(self, key: str, entry: AgentEntry, moment: datetime) -> AgentState:
        """The copy's entry with its effective status at ``moment`` and its revision."""
        stale = entry.is_stale(moment)
        revision = self.mirror.revision_of(key) or 0
        return AgentState(entry, AgentStatus.OFFLINE if stale else entry.status, stale, revision)

    async def list_page(
        self, query: AgentQuery, *, limit: int = 50, cursor: str | None = None
    ) -> Page[AgentState]:
        """Sorted by handle then id; the cursor remembers the last one returned."""
        await self.mirror.sync()
        after = decode_cursor(cursor)
        last: tuple[str, str] | None = None
        if after is not None:
            try:
                last = (str(after["h"]), str(after["id"]))
            except KeyError:
                raise CursorError() from None
        matching = [s for s in self.states() if query.matches(s.entry, s.status)]
        matching.sort(key=lambda s: (s.entry.handle, s.entry.agent_id))
        total = len(matching)
        if last is not None:
            matching = [s for s in matching if (s.entry.handle, s.entry.agent_id) > last]
        page = matching[:limit]
        more = len(matching) > limit
        next_cursor = (
            encode_cursor({"h": page[-1].entry.handle, "id": page[-1].entry.agent_id}) if more else None
        )
        return Page(items=page, next_cursor=next_cursor, total=total)

    # -- shutdown ---------------------------------------------------------------
    async def request_shutdown(
        self, agent_id: str, *, reason: str = "", grace_s: float = 30, by: str = "weft"
    ) -> AgentState:
        """Ask the agent's Warp to drain, deregister and exit (it listens on its control subject).

        The event is stored before the request is sent: it carries the entry as read before
        asking (online), and told after the agent's own ``offline`` (an idle agent leaves
        within milliseconds; a loaded Weft can relay that first) it put a stopped agent back
        online for every reader that takes the last event as news (the console did)."""
        state = await self.get(agent_id)
        request = ControlRequest(action="shutdown", reason=reason, requested_by=by, grace_s=grace_s)
        await self._publish(
            "shutdown-requested",
            state.entry,
            state.status,
            state.revision,
            extra={"reason": reason, "grace_s": grace_s, "requested_by": by},
        )
        await self._nc.publish(self.names.control_subject(agent_id), request.to_json_bytes())
        await settle(self._nc)
        return state

    # -- derived events ------------------------------------------------------------
    async def _changed(
        self,
        key: str,
        before: Slot[AgentEntry] | None,
        after: Slot[AgentEntry] | None,
        initial: bool,
    ) -> None:
        if initial:
            entry = None if after is None else self.mirror.value_of(key, after)
            if entry is not None and entry.is_stale():  # already offline before we started: nothing new
                self._stale_reported[key] = after.revision if after is not None else 0
            return
        if after is None:
            gone = None if before is None else self.mirror.value_of(key, before)
            if before is not None and gone is not None:
                self._stale_reported.pop(key, None)
                await self._publish(
                    "deregistered",
                    gone,
                    AgentStatus.OFFLINE,
                    before.revision,
                    msg_id=f"{key}.{before.revision}.deleted",
                )
            return
        entry = self.mirror.value_of(key, after)
        if entry is None:
            return
        msg_id = f"{key}.{after.revision}"
        previous = None if before is None else self.mirror.value_of(key, before)
        # What an entry says is news as of when it was written, however late this copy reads
        # it: a Weft short of CPU reads the registry late, and judged by the clock each change
        # (a heartbeat, a claim's busy) would look like heartbeats missed (200 agents on two
        # cores: hundreds of false offlines). Missed heartbeats are told by check_staleness
        # alone, from a copy that has caught up.
        effective = entry.status
        if previous is None:
            await self._publish("registered", entry, effective, after.revision, msg_id=msg_id)
            return
        was_stale = self._stale_reported.pop(key, None) is not None
        previous_status = AgentStatus.OFFLINE if was_stale else previous.status
        if effective != previous_status:
            action = "offline" if effective is AgentStatus.OFFLINE else "status-changed"
            await self._publish(
                action,
                entry,
                effective,
                after.revision,
                msg_id=msg_id,
                extra={"previous_status": previous_status},
            )
        elif any(getattr(entry, f) != getattr(previous, f) for f in _PRESENCE_FIELDS):
            await self._publish("updated", entry, effective, after.revision, msg_id=msg_id)

    def _looks_stale(self, key: str, entry: AgentEntry, moment: datetime) -> bool:
        """Stale at ``moment`` by this copy and not yet announced at its revision."""
        revision = self.mirror.revision_of(key)
        return (
            revision is not None
            and entry.status is not AgentStatus.OFFLINE
            and entry.is_stale(moment)
            and self._stale_reported.get(key) != revision
        )

    async def still_stale(self, agent_id: str) -> bool:
        """Whether the agent's heartbeats stopped, asked again once the copy has caught up.

        The copy is as fresh as this process's loop: on a loaded machine it can hold heartbeats
        that NATS already has, and an agent that beats every second then looks stale. A
        decision taken on staleness (an ``offline`` event, stopping a spun-up agent) asks this
        first; while the copy cannot catch up, nobody is taken for offline (the next check asks
        again): a late copy makes every agent look stale."""
        if not await self.mirror.sync():
            return False
        entry = self.mirror.get(agent_id)
        return entry is None or entry.is_stale(utcnow())

    async def check_staleness(self, now: datetime | None = None) -> list[str]:
        """Announce agents whose heartbeats stopped (once per registry revision), judged from a
        copy brought up to date once per check; while it cannot catch up, nobody is announced
        (a late copy makes every agent look stale) and the next check asks again."""
        moment = now or utcnow()
        suspects = [key for key, entry in self.mirror.items() if self._looks_stale(key, entry, moment)]
        if not suspects or not await self.mirror.sync():
            return []
        announced: list[str] = []
        for key in suspects:
            entry, revision = self.mirror.get(key), self.mirror.revision_of(key)
            if entry is None or revision is None:
                continue  # deregistered meanwhile: that event says it
            if not entry.is_stale(utcnow()):
                continue  # a heartbeat the copy had not read yet
            self._stale_reported[key] = revision
            await self._publish(
                "offline",
                entry,
                AgentStatus.OFFLINE,
                revision,
                msg_id=f"{key}.{revision}.stale",
                extra={"previous_status": entry.status, "reason": "heartbeats stopped"},
            )
            announced.append(key)
        return announced

    async def _watch_staleness(self, interval: float) -> None:
        while True:
            await tick(interval)
            try:
                await self.check_staleness()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise_if_cancelling()
                log.warning("agent staleness check failed for %s: %s", self.names.project_id, exc)

    async def _publish(
        self,
        action: str,
        entry: AgentEntry,
        status: AgentStatus,
        revision: int,
        *,
        msg_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """``revision``: the registry revision of ``entry`` (events of one agent can reach a
        reader out of revision order: two replicas relay changes; a whole read can be newer)."""
        data: dict[str, Any] = {
            "agent": entry.model_dump(mode="json"),
            "status": status.value,
            "revision": revision,
        }
        if extra:
            data.update({k: (v.value if isinstance(v, AgentStatus) else v) for k, v in extra.items()})
        try:
            await publish_event(
                self._js,
                self.names,
                "agent",
                action,
                entry.agent_id,
                data,
                msg_id=f"agent.{msg_id}" if msg_id else None,
            )
        except Exception as exc:  # an event lost to a NATS hiccup must not stop the mirror
            raise_if_cancelling()
            log.warning("could not publish agent.%s for %s: %s", action, entry.agent_id, exc)
