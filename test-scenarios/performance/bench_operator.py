"""The operator's controls on running work (docs/operator.md), each against the raw NATS work
it stands on, in the same run:

- hand back: ``WorkQueue.hand_back`` (a pause that stops running work: the record's
  compare-and-set, the claim's message handed back with ``-NAK``, the event) against a raw KV
  update and a publish.
- prioritize: ``WorkQueue.prioritize`` of a queued bottleneck (the compare-and-set, a new
  queue message on its new subject, the old one deleted, the event) against a raw KV update,
  a publish and a message delete.
- silence scan: ``shared.work.silence.silent`` over N held items, the work each sweep does
  (pure: no baseline); ``run.py`` draws it as a scale curve.
"""

from __future__ import annotations

import time
from datetime import timedelta

from benchlib import BenchContext, BenchResult, summarize
from nats.js.api import StreamConfig

from shared.limits import PRIORITY_MAX
from shared.models import WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.jetstream import ensure_kv
from shared.work.rules import Claimant
from shared.work.silence import silent
from testsupport.work import work_queue

AGENT = "a" * 32
CODER = Claimant(AGENT, "generic", ("code",), ("default",))
RAW_BACK = "raw: KV update + a publish (hand back)"
RAW_RAISE = "raw: KV update + a publish + a message delete (prioritize)"


async def run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(200, 20)
    project = f"bench-operator-{time.monotonic_ns() % 10**9}"
    names = ProjectNames(project)
    nc = await connect(url=ctx.nats_url)
    raw_back: list[float] = []
    backs: list[float] = []
    raw_raise: list[float] = []
    raises: list[float] = []
    try:
        queue = work_queue(nc, names)
        js = nc.jetstream()
        raw_kv = await ensure_kv(js, f"bench-raw-operator-{project}")
        raw_stream = f"BENCH-RAW-OP-{project}"
        await js.add_stream(StreamConfig(name=raw_stream, subjects=[f"bench-raw-op.{project}.>"]))
        for i in range(n):
            item = await queue.submit(WorkSubmission(task_id=f"t{i}", description="d", capability="code"))
            assert await queue.claim(CODER) is not None
            revision = await raw_kv.put(f"w{i}", item.to_json_bytes())
            start = time.perf_counter()
            revision = await raw_kv.update(f"w{i}", item.to_json_bytes(), last=revision)
            await nc.publish(f"bench-raw-op.{project}.nak", b"-NAK")
            await nc.flush()
            raw_back.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            back = await queue.hand_back(item.id, AGENT, "bench")
            backs.append((time.perf_counter() - start) * 1000)
            assert back.status is WorkStatus.QUEUED
            start = time.perf_counter()
            await raw_kv.update(f"w{i}", item.to_json_bytes(), last=revision)
            ack = await js.publish(f"bench-raw-op.{project}.q", b"{}")
            await js.delete_msg(raw_stream, ack.seq)
            raw_raise.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            raised = await queue.prioritize(item.id, PRIORITY_MAX, "bench")
            raises.append((time.perf_counter() - start) * 1000)
            assert raised is not None and raised.priority == PRIORITY_MAX
            taken = await queue.claim(CODER)  # out of the way of the next one
            assert taken is not None and taken.id == item.id
            await queue.complete(item.id, AGENT, "done")
        await js.delete_stream(raw_stream)
        await js.delete_key_value(f"bench-raw-operator-{project}")
    finally:
        await nc.close()
    results = [
        summarize(RAW_BACK, raw_back),
        summarize(
            "operator: hand back a held item (a pause that stops running work)",
            backs,
            baseline=RAW_BACK,
            target="the record's compare-and-set (a read first), the -NAK, the event",
        ),
        summarize(RAW_RAISE, raw_raise),
        summarize(
            "operator: prioritize a queued bottleneck",
            raises,
            baseline=RAW_RAISE,
            target="the compare-and-set, the new queue message and its seq stored, the old one deleted",
        ),
    ]
    for size in (100, 1000) if ctx.quick else (100, 1000, 10000):
        held = _held(size)
        now = utcnow()
        start = time.perf_counter()
        found = silent(held, now, 1800, 1800)
        value = (time.perf_counter() - start) * 1000
        assert len(found) == size // 2
        result = BenchResult(name=f"operator silence scan @ {size} items", samples=1, value=value)
        result.extra["per_item_ms"] = value / size
        results.append(result)
    return results


def _held(size: int) -> list[WorkItem]:
    """Held items, half of them silent for an hour (the other half claimed a minute ago)."""
    now = utcnow()
    return [
        WorkItem(
            task_id=f"t{i}",
            description="d",
            capability="code",
            project_id="bench",
            status=WorkStatus.IN_PROGRESS if i % 2 else WorkStatus.CLAIMED,
            assigned_to=AGENT,
            claimed_at=now - timedelta(hours=1 if i % 2 else 0, minutes=1),
        )
        for i in range(size)
    ]
