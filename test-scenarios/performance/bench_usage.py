"""Usage reports on the work lifecycle (docs/operations.md): progress and completion with
usage against the same without it, and a claim with a daily budget set against one without,
each next to raw nats-py doing the NATS work of a report (a KV compare-and-set)."""

from __future__ import annotations

import time
import uuid

from benchlib import BenchContext, BenchResult, summarize, time_async

from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.usage.rules import Budget, Usage, with_project_budget
from shared.work.rules import Claimant
from testsupport.work import work_queue

AGENT = "a" * 32
USAGE = Usage(input_tokens=1200, output_tokens=300, cost=0.02, model="bench-model")
RAW_CAS = "raw nats-py: kv get+update (CAS)"
RAW_TWO = "raw nats-py: 2x kv get+update (CAS)"


async def _raw_cas(ctx: BenchContext, n: int, writes: int) -> list[float]:
    """Raw nats-py: read a key and write it back on its revision (``writes`` times in a row)."""
    nc = await connect(url=ctx.nats_url)
    js = nc.jetstream()
    bucket = f"raw-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(bucket=bucket)
    await kv.put("k", b'{"n":0}')

    async def op() -> None:
        for _ in range(writes):
            entry = await kv.get("k")
            await kv.update("k", b'{"n":1}', last=entry.revision)

    try:
        return await time_async(op, n)
    finally:
        await js.delete_key_value(bucket)
        await nc.close()


async def _progress(ctx: BenchContext, n: int, usage: Usage | None) -> list[float]:
    """``WorkQueue.progress`` on one claimed item, with or without usage."""
    nc = await connect(url=ctx.nats_url)
    q = work_queue(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"), ack_wait_s=600)
    item = await q.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    assert await q.claim(Claimant(agent_id=AGENT, agent_type="generic", capabilities=("code",))) is not None
    if usage is not None:
        await q.ledger.add(usage, target_id=None, now=item.created_at)  # the counters exist

    async def op() -> None:
        await q.progress(item.id, AGENT, 50, usage=usage)

    try:
        return await time_async(op, n)
    finally:
        await nc.close()


async def _lifecycle(
    ctx: BenchContext, n: int, usage: Usage | None, budget: bool
) -> tuple[list[float], list[float]]:
    """submit -> claim (-> samples) -> complete (with usage) (-> samples)."""
    nc = await connect(url=ctx.nats_url)
    q = work_queue(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"))
    if budget:
        await q.ledger.change_budgets(lambda d: with_project_budget(d, Budget(cost=10**8)))
    claimant = Claimant(agent_id=AGENT, agent_type="generic", capabilities=("code",))
    claims: list[float] = []
    completions: list[float] = []

    async def op() -> None:
        item = await q.submit(WorkSubmission(task_id="t", description="d", capability="code"))
        start = time.perf_counter()
        got = await q.claim(claimant)
        assert got is not None and got.id == item.id
        claims.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await q.complete(item.id, AGENT, usage=usage)
        completions.append((time.perf_counter() - start) * 1000)

    try:
        await time_async(op, n)
        return claims[-n:], completions[-n:]
    finally:
        await nc.close()


async def run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(300, 20)
    results = [
        summarize(RAW_CAS, await _raw_cas(ctx, n, 1)),
        summarize(RAW_TWO, await _raw_cas(ctx, n, 2)),
        summarize("usage: progress, no usage (shared.work)", await _progress(ctx, n, None), baseline=RAW_CAS),
        summarize("usage: progress with usage", await _progress(ctx, n, USAGE), baseline=RAW_TWO),
    ]
    claim_plain, done_plain = await _lifecycle(ctx, n, None, budget=False)
    _, done_usage = await _lifecycle(ctx, n, USAGE, budget=False)
    claim_budget, _ = await _lifecycle(ctx, n, USAGE, budget=True)
    results += [
        summarize("usage: complete, no usage", done_plain, baseline=RAW_CAS),
        summarize("usage: complete with usage", done_usage, baseline=RAW_TWO),
        summarize("usage: claim, no budget", claim_plain),
        summarize("usage: claim, daily budget set", claim_budget),
    ]
    return results
