"""Scale curve of Weft's routing decision: 10 / 100 / 1,000 / 10,000 agents.

Routing runs on every submit and on every sweep over every waiting item, and it scans
the project's agents (``weft.routing``: eligibility by capability, boundary, type,
capacity, liveness and policy, then a sort of the eligible ones). This measures
``Router.route`` for one item over a project view with N registered agents, a tenth of
which have the item's capability, half of those busy. The project view is Weft's own
in-memory shape (mirror values, targets, cached policy) without NATS, so the figure is the
decision itself; the registry listing curve (NATS included) is in ``bench_core``.

``run.py`` turns every ``... @ N agents`` series into a scale curve with per-agent cost
and a growth check (no worse than linear).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from benchlib import BenchContext, BenchResult, summarize
from nats.aio.client import Client as NatsClient

from shared.models import AgentEntry, AgentStatus, Target, WorkItem
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.trace.tracing import TraceLog
from shared.work.policy import BoundaryPolicy
from weft.routing import Router

SIZES = (10, 100, 1000, 10000)
PROJECT = "bench-routing"


@dataclass
class _Policy:
    policy: BoundaryPolicy

    async def __call__(self) -> BoundaryPolicy:
        return self.policy


@dataclass
class _Mirror:
    entries: list[AgentEntry]
    revision: int = 1
    """The registry copy's revision: these entries never change."""

    def values(self) -> list[AgentEntry]:
        return self.entries

    def __len__(self) -> int:
        return len(self.entries)


@dataclass
class _Agents:
    mirror: _Mirror


@dataclass
class _Queue:
    policy: _Policy


@dataclass
class _Targets:
    targets: list[Target] = field(default_factory=list)

    def all(self) -> list[Target]:
        return self.targets


@dataclass
class _ProjectView:
    """What ``Router.route`` reads from a ``ProjectContext``: agents, targets, policy, traces."""

    agents: _Agents
    queue: _Queue
    targets: _Targets
    traces: TraceLog
    """The real trace log: routing a new item is a span of its trace (published on a real
    connection, to a subject no stream keeps here)."""


class _NoSpinup:
    async def request_spinup(self, project: Any, item: Any) -> None:
        raise AssertionError("an eligible agent is online; routing must not ask for a spin-up")


def _agents(n: int) -> list[AgentEntry]:
    entries = []
    for i in range(n):
        capable = i % 10 == 0
        entries.append(
            AgentEntry(
                agent_id=f"{i:032x}",
                handle=f"agent-{i}",
                agent_type=("claude-code", "copilot", "generic")[i % 3],
                project_id=PROJECT,
                user_id="0" * 16,
                capabilities=["code", "review"] if capable else ["docs"],
                boundaries=["default"],
                status=AgentStatus.BUSY if capable and i % 20 == 0 else AgentStatus.ONLINE,
                current_tasks=1 if capable and i % 20 == 0 else 0,
                max_concurrent_tasks=2,
            )
        )
    return entries


async def _route_samples(nc: NatsClient, n: int, iterations: int) -> list[float]:
    traces = TraceLog(nc, ProjectNames(PROJECT))
    queue = _Queue(_Policy(BoundaryPolicy()))
    view = _ProjectView(agents=_Agents(_Mirror(_agents(n))), queue=queue, targets=_Targets(), traces=traces)
    router = Router(_NoSpinup())
    item = WorkItem(
        task_id="t", description="d", capability="code", project_id=PROJECT, preferred_agent_type="copilot"
    )
    expected = max(1, n // 10)
    for _ in range(3):
        decision = await router.route(view, item)  # type: ignore[arg-type]
        assert decision.outcome == "agent-available" and len(decision.agents) == expected
    samples: list[float] = []
    for _ in range(iterations):
        start = time.perf_counter()
        await router.route(view, item)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - start) * 1000)
    await traces.close()
    return samples


async def run(ctx: BenchContext) -> list[BenchResult]:
    results: list[BenchResult] = []
    nc = await connect(url=ctx.nats_url)
    try:
        for n in SIZES:
            iterations = max(10, min(2000, 200_000 // n)) if not ctx.quick else max(5, min(50, 5000 // n))
            result = summarize(f"weft routing decision @ {n} agents", await _route_samples(nc, n, iterations))
            result.extra["per_agent_us"] = (result.p50 or 0) * 1000 / n
            results.append(result)
    finally:
        await nc.close()
    return results
