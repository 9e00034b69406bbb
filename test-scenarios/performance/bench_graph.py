"""Work with dependencies (shared.work + shared.work.graph), without MCP or HTTP.

* **unblock latency**: a dependent waits for one item; the clock runs from the call that
  completes that item to the moment an agent has claimed the dependent. It covers the
  completion, telling the dependent (one compare-and-set), its queue message and the
  claim. Target p95 <= 20 ms (issue 14). The raw row does the same NATS work by hand:
  a KV update, a publish, a pull and an ack.
* **plan curve**: a plan of N items in layers of 10, each item after two items of the
  layer before, is submitted in one ``submit_plan`` and then run to the end by one agent
  (claim, complete, repeat); ``graph plan submit @ N items`` is the submission alone and
  ``graph plan submit+resolve @ N items`` the whole. ``run.py`` draws both as scale curves
  (per-item cost at each size, growth no worse than linear).
"""

from __future__ import annotations

import time
import uuid

from benchlib import BenchContext, BenchResult, summarize
from nats.js.api import AckPolicy, ConsumerConfig, KeyValueConfig, RetentionPolicy, StreamConfig

from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.work.graph import PlanStep
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.work import work_queue

AGENT = "a" * 32
CLAIMANT = Claimant(agent_id=AGENT, agent_type="generic", capabilities=("code",))
RAW = "raw nats-py: kv update + publish->fetch->ack"


def _sub(task: str, *depends_on: str) -> WorkSubmission:
    return WorkSubmission(task_id=task, description="d", capability="code", depends_on=list(depends_on))


async def _claim(q: WorkQueue) -> str:
    while True:
        item = await q.claim(CLAIMANT)
        if item is not None:
            return item.id


async def _unblock(ctx: BenchContext, n: int) -> list[float]:
    nc = await connect(url=ctx.nats_url)
    q = work_queue(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"))
    samples: list[float] = []
    try:
        for i in range(n + 5):
            first = await q.submit(_sub("first"))
            after = await q.submit(_sub("after", first.id))
            assert await _claim(q) == first.id
            start = time.perf_counter()
            await q.complete(first.id, AGENT)
            claimed = await _claim(q)
            elapsed = (time.perf_counter() - start) * 1000
            assert claimed == after.id
            await q.complete(after.id, AGENT)
            if i >= 5:  # warm-up
                samples.append(elapsed)
        return samples
    finally:
        await nc.close()


async def _raw(ctx: BenchContext, n: int) -> list[float]:
    """The same NATS work by hand: update a record, publish the queue message, pull it, ack it."""
    nc = await connect(url=ctx.nats_url)
    js = nc.jetstream()
    name = f"RAW-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(KeyValueConfig(bucket=name.lower()))
    await js.add_stream(
        StreamConfig(name=name, subjects=[f"raw.{name}.>"], retention=RetentionPolicy.WORK_QUEUE)
    )
    psub = await js.pull_subscribe(
        f"raw.{name}.q", durable="c", stream=name, config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT)
    )
    revision = await kv.put("item", b'{"status": "blocked"}')
    samples: list[float] = []
    try:
        for i in range(n + 5):
            start = time.perf_counter()
            revision = await kv.update("item", b'{"status": "queued"}', last=revision)
            await js.publish(f"raw.{name}.q", b'{"work_id": "item"}')
            msgs = await psub.fetch(1, timeout=2)
            await msgs[0].ack_sync()
            if i >= 5:
                samples.append((time.perf_counter() - start) * 1000)
        return samples
    finally:
        await js.delete_stream(name)
        await js.delete_key_value(name.lower())
        await nc.close()


def _plan(size: int, width: int = 10) -> list[PlanStep]:
    steps: list[PlanStep] = []
    for index in range(size):
        layer = index // width
        if layer == 0:
            steps.append(PlanStep(_sub(f"s{index}")))
            continue
        base = (layer - 1) * width
        after = sorted({base + index % width, base + (index + 1) % width})
        steps.append(PlanStep(_sub(f"s{index}"), after=tuple(after)))
    return steps


async def _plan_run(ctx: BenchContext, size: int) -> tuple[float, float]:
    nc = await connect(url=ctx.nats_url)
    q = work_queue(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"))
    try:
        await q.ensure()
        steps = _plan(size)
        start = time.perf_counter()
        items = await q.submit_plan(steps)
        submitted = (time.perf_counter() - start) * 1000
        done = 0
        while done < size:
            work_id = await _claim(q)
            await q.complete(work_id, AGENT)
            done += 1
        whole = (time.perf_counter() - start) * 1000
        finals = {i.id: await q.get(i.id) for i in items}
        assert all(f.status.value == "completed" for f in finals.values())
        return submitted, whole
    finally:
        await nc.close()


async def run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(300, 20)
    results = [
        summarize(RAW, await _raw(ctx, n)),
        summarize(
            "graph: dependency completed -> dependent claimed",
            await _unblock(ctx, n),
            baseline=RAW,
            target="p95 <= 20 ms",
        ),
    ]
    for size in (10, 100) if ctx.quick else (10, 100, 1000):
        submitted, whole = await _plan_run(ctx, size)
        for name, value in (("graph plan submit", submitted), ("graph plan submit+resolve", whole)):
            result = BenchResult(name=f"{name} @ {size} items", samples=1, value=value)
            result.extra["per_item_ms"] = value / size
            results.append(result)
    return results
