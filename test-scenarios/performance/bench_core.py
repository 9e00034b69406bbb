"""Core paths without MCP or HTTP: the shared work lifecycle and registry
listing, each against raw nats-py doing the same NATS operations."""

from __future__ import annotations

import time
import uuid

from benchlib import BenchContext, BenchResult, summarize, time_async
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.work.rules import Claimant
from testsupport.work import work_queue

AGENT = "a" * 32


async def _raw_queue(ctx: BenchContext, n: int) -> list[float]:
    """Raw nats-py: publish to a work-queue stream, pull one, ack it."""
    nc = await connect(url=ctx.nats_url)
    js = nc.jetstream()
    stream = f"RAW-{uuid.uuid4().hex[:8]}"
    await js.add_stream(
        StreamConfig(name=stream, subjects=[f"raw.{stream}.>"], retention=RetentionPolicy.WORK_QUEUE)
    )
    psub = await js.pull_subscribe(
        f"raw.{stream}.q", durable="c", stream=stream, config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT)
    )

    async def op() -> None:
        await js.publish(f"raw.{stream}.q", b'{"work_id":"x"}')
        msgs = await psub.fetch(1, timeout=2)
        await msgs[0].ack_sync()

    try:
        return await time_async(op, n)
    finally:
        await js.delete_stream(stream)
        await nc.close()


async def _core_queue(ctx: BenchContext, n: int) -> tuple[list[float], list[float]]:
    nc = await connect(url=ctx.nats_url)
    q = work_queue(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"))
    claimant = Claimant(agent_id=AGENT, agent_type="generic", capabilities=("code",))
    submit_to_claim: list[float] = []
    lifecycle: list[float] = []

    async def op() -> None:
        start = time.perf_counter()
        item = await q.submit(WorkSubmission(task_id="t", description="d", capability="code"))
        got = await q.claim(claimant)
        assert got is not None and got.id == item.id
        submit_to_claim.append((time.perf_counter() - start) * 1000)
        await q.complete(item.id, AGENT)
        lifecycle.append((time.perf_counter() - start) * 1000)

    try:
        await time_async(op, n)
        return submit_to_claim[-n:], lifecycle[-n:]
    finally:
        await nc.close()


async def _registry_listing(ctx: BenchContext, agents: int, n: int) -> list[float]:
    nc = await connect(url=ctx.nats_url)
    project = f"bench-{uuid.uuid4().hex[:8]}"
    reg = Registry(nc.jetstream(), ProjectNames(project))
    await reg.ensure()
    for i in range(agents):
        await reg.put(
            AgentEntry(
                agent_id=f"{i:032x}",
                handle=f"agent-{i}",
                project_id=project,
                user_id="0" * 16,
                capabilities=["code"],
            )
        )

    async def op() -> None:
        assert len(await reg.list_project()) == agents

    try:
        return await time_async(op, n, warmup=2)
    finally:
        await nc.close()


async def run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(300, 20)
    results = [summarize("raw nats-py: publish->fetch->ack", await _raw_queue(ctx, n))]
    to_claim, lifecycle = await _core_queue(ctx, n)
    results.append(
        summarize(
            "core: submit->claimed (shared.work)",
            to_claim,
            baseline="raw nats-py: publish->fetch->ack",
        )
    )
    results.append(
        summarize(
            "core: submit->claimed->completed",
            lifecycle,
            baseline="raw nats-py: publish->fetch->ack",
        )
    )
    sizes = (10, 100, 1000) if ctx.quick else (10, 100, 1000, 10000)
    for agents in sizes:
        reps = max(5, min(50, 20000 // agents)) if not ctx.quick else 5
        samples = await _registry_listing(ctx, agents, reps)
        res = summarize(f"registry list_project @ {agents} agents", samples)
        res.extra["per_agent_us"] = (res.p50 or 0) * 1000 / agents
        results.append(res)
    return results
