"""Idle shutdown of agents that a target started.

An agent is idle when it holds no work: ``current_tasks == 0`` and status not
``busy`` in its registry entry, and no item it holds in the work records (claimed,
in progress, being reviewed by it, or waiting on the operator for it). Its idle
time runs from its latest work activity: the last change to any work item
assigned to it (claim, progress, completion, failure), or its registration if
it never had any. Heartbeats and tool calls only prove it is alive (Warp's
``last_activity`` moves with every tool call, including polling for work), so
they are not activity.

Steps, each an event: past the target's ``idle_timeout_s`` (0 = never) the
agent is asked to shut down through Warp (``spinup.shutdown-requested``, a
``ControlRequest`` on its control subject); when it has gone, or is still
there after the grace period, its mechanism stops it (``spinup.stopping``,
``spinup.stopped``). An agent holding work is never stopped: if it claimed
something after the request, Weft waits for it to finish. Each tick reads Weft's copies of
the registry and the work records; a decision to ask an agent to leave, or to stop it, is
taken again on copies caught up with NATS before it is acted on (a copy can miss a claim
made a moment ago on a loaded machine).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from shared.models import AgentEntry, AgentStatus, SpinupState, Target, WorkItem, utcnow
from shared.work.rules import HOLDING
from weft.spinup.manager import SpinupManager
from weft.spinup.store import SpinupRecord

log = logging.getLogger("loom.weft.spinup.idle")


@dataclass
class WorkActivity:
    held: int = 0
    last: datetime | None = None


def work_activity(items: Iterable[WorkItem], agent_ids: set[str]) -> dict[str, WorkActivity]:
    """Held items and latest work change per agent, from one pass over the work items."""
    activity: dict[str, WorkActivity] = {}
    if not agent_ids:
        return activity
    for item in items:
        if item.assigned_to not in agent_ids:
            continue
        entry = activity.setdefault(item.assigned_to, WorkActivity())
        if item.status in HOLDING:
            entry.held += 1
        if entry.last is None or item.updated_at > entry.last:
            entry.last = item.updated_at
    return activity


def idle_since(record: SpinupRecord, agent: AgentEntry, work: WorkActivity | None) -> datetime:
    """When the agent last did something with work (or registered, if it never has).

    Not the entry's ``last_activity``: Warp moves that on every tool call, and an agent
    that polls ``warp_work_claim`` without getting anything is idle all the same."""
    moments = [agent.registered_at]
    if record.op.registered_at is not None:
        moments.append(record.op.registered_at)
    if work is not None and work.last is not None:
        moments.append(work.last)
    return max(moments)


def held_by(agent: AgentEntry | None, work: WorkActivity | None) -> int:
    """What the agent holds: its work items, its own count, one more if it says it is busy."""
    held = (work.held if work else 0) + (agent.current_tasks if agent else 0)
    if agent is not None and agent.status is AgentStatus.BUSY:
        held += 1  # it says it is busy (e.g. with something that is not a work item)
    return held


def idle_reason(
    record: SpinupRecord,
    agent: AgentEntry | None,
    work: WorkActivity | None,
    target: Target | None,
    now: datetime,
) -> str | None:
    """Why a registered agent should be asked to leave now, or None while it may stay."""
    if target is None or target.idle_timeout_s == 0 or agent is None or held_by(agent, work):
        return None
    if agent.effective_status(now) is AgentStatus.OFFLINE:
        return None
    idle_s = (now - idle_since(record, agent, work)).total_seconds()
    if idle_s <= target.idle_timeout_s:
        return None
    return f"idle for {idle_s:.1f}s (idle_timeout_s {target.idle_timeout_s:g})"


class IdleMonitor:
    def __init__(self, manager: SpinupManager) -> None:
        self.manager = manager

    async def _caught_up(self, agent_id: str) -> tuple[AgentEntry | None, WorkActivity | None, datetime]:
        """The agent and its work as NATS has them now. The copies are as fresh as Weft's loop,
        and on a loaded machine they can miss a claim made a moment ago: a decision to stop an
        agent is taken again on these before it is acted on."""
        context = self.manager.context
        await context.agents.mirror.sync()
        await context.work.mirror.sync()
        activity = work_activity(context.work.mirror.values(), {agent_id})
        return context.agents.mirror.get(agent_id), activity.get(agent_id), utcnow()

    async def check(
        self,
        live: list[SpinupRecord],
        agents: Mapping[str, AgentEntry],
        targets: Mapping[str, Target],
        now: datetime,
        work_items: Iterable[WorkItem],
    ) -> None:
        watched = [r for r in live if r.op.state in (SpinupState.REGISTERED, SpinupState.STOPPING)]
        if not watched:
            return
        activity = work_activity(work_items, {r.op.agent_id for r in watched})
        grace = self.manager.settings.shutdown_grace_s
        for record in watched:
            op = record.op
            agent = agents.get(op.agent_id)
            work = activity.get(op.agent_id)
            held = held_by(agent, work)
            online = agent is not None and agent.effective_status(now) is not AgentStatus.OFFLINE
            if op.state is SpinupState.REGISTERED:
                target = targets.get(op.target_id)
                if idle_reason(record, agent, work, target, now) is None:
                    continue
                agent, work, moment = await self._caught_up(op.agent_id)
                reason = idle_reason(record, agent, work, target, moment)
                if reason is not None:
                    await self.manager.request_shutdown(op.id, reason, grace)
            elif record.shutdown_requested_at is not None and record.stop_started_at is None:
                overdue = (now - record.shutdown_requested_at).total_seconds() > grace
                if online and (held or not overdue):
                    continue  # never stop an agent holding work; it drains first
                agent, work, moment = await self._caught_up(op.agent_id)
                online = agent is not None and agent.effective_status(moment) is not AgentStatus.OFFLINE
                if not online:
                    await self.manager.finish(
                        op.id, SpinupState.STOPPING, reason="left after its shutdown request"
                    )
                elif held_by(agent, work):
                    continue
                elif overdue:
                    await self.manager.finish(
                        op.id,
                        SpinupState.STOPPING,
                        reason=f"still running {grace:g}s after its shutdown request",
                    )
