"""Pattern recall against store size: 100, 1,000 and 10,000 memories, limit 50.

Recall reads the in-process index (kept current by ordered consumers on the
agent's subject filters), walks categories in rank order and stops one past
``limit``, so its cost should follow ``limit`` and not the store size. Raw
nats-py baselines in the same run: one KV get (the cheapest memory read NATS
offers) and a full scan of the bucket (what recall would cost without the
index). Also measured: loading the index at start-up, and recall through an
in-process MCP session (tool dispatch plus JSON).
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
import uuid
from datetime import timedelta
from pathlib import Path

from benchlib import BenchContext, BenchResult, summarize, time_async
from mcp import Client
from mcp.server.mcpserver import MCPServer

from pattern.config import PatternConfig
from pattern.index import MemoryIndex
from pattern.inputs import RecallInput
from pattern.keys import memory_key
from pattern.models import Category, MemoryRecord, Scope, utcnow
from pattern.service import MemoryService
from pattern.tools import pattern_tools
from pattern.watch import BucketWatch
from shared.identity import Identity
from shared.names import kv_stream, kv_subject
from shared.nats.client import connect

SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
"""A quick run (the perf smoke in ``make test``) proves the module works; filling and indexing
10,000 memories there cost a loaded machine minutes and told nothing more."""
LIMIT = 50
TARGET = "p95 <= 20 ms at 10,000"

# category mix of a working agent: few core, some kept knowledge, mostly recent/tasks
MIX = (
    (Category.CORE, Scope.PRIVATE, 0.01),
    (Category.LONGTERM, Scope.PRIVATE, 0.14),
    (Category.DECISIONS, Scope.TEAM, 0.08),
    (Category.LEARNINGS, Scope.TEAM, 0.07),
    (Category.ARCHITECTURE, Scope.TEAM, 0.05),
    (Category.RECENT, Scope.PRIVATE, 0.40),
    (Category.TASKS, Scope.PRIVATE, 0.25),
)
TAGS = ("db", "api", "ui", "perf", "auth", "infra", "ci", "docs")


def _identity(project_id: str, scratch: Path) -> Identity:
    agent = secrets.token_hex(16)
    return Identity(
        project_id=project_id,
        project_path=scratch,
        agent_id=agent,
        base_agent_id=agent,
        hostname="bench",
        handle="bench",
        agent_type="generic",
        user_id=secrets.token_hex(8),
    )


def _records(identity: Identity, n: int) -> list[MemoryRecord]:
    rng = random.Random(n)
    now = utcnow()
    out: list[MemoryRecord] = []
    for i in range(n):
        roll, acc = rng.random(), 0.0
        category, scope = MIX[-1][0], MIX[-1][1]
        for cat, sc, share in MIX:
            acc += share
            if roll < acc:
                category, scope = cat, sc
                break
        created = now - timedelta(seconds=n - i)
        out.append(
            MemoryRecord(
                scope=scope,
                category=category,
                content=f"memory {i}: "
                + " ".join(rng.choice(("alpha", "beta", "gamma", "delta")) for _ in range(40)),
                tags=rng.sample(TAGS, 2),
                priority=rng.randint(1, 10),
                agent_id=identity.agent_id,
                project_id=identity.project_id,
                user_id=identity.user_id,
                handle=identity.handle,
                created_at=created,
                updated_at=created,
                expires_at=created + timedelta(hours=24)
                if category in (Category.RECENT, Category.TASKS)
                else None,
            )
        )
    return out


async def _fill(js: object, bucket: str, records: list[MemoryRecord]) -> list[str]:
    """Publish straight to the bucket (setup only), 200 in flight at a time."""
    keys = [memory_key(r.scope, r.agent_id, r.category, r.id) for r in records]
    for start in range(0, len(records), 200):
        batch = zip(keys[start : start + 200], records[start : start + 200], strict=True)
        await asyncio.gather(
            *(
                js.publish(kv_subject(bucket, k), r.model_dump_json().encode(), stream=kv_stream(bucket))  # type: ignore[attr-defined]
                for k, r in batch
            )
        )
    return keys


async def run(ctx: BenchContext) -> list[BenchResult]:
    nc = await connect(url=ctx.nats_url, name="bench-pattern")
    js = nc.jetstream()
    results: list[BenchResult] = []
    iterations = ctx.iterations(400, 20)
    try:
        sizes = QUICK_SIZES if ctx.quick else SIZES
        for n in sizes:
            project = f"bench-mem-{uuid.uuid4().hex[:8]}"
            identity = _identity(project, ctx.scratch)
            config = PatternConfig(export_dir=ctx.scratch / "exports")
            service = MemoryService(nc, identity, config)
            await service.start()
            keys = await _fill(js, service.buckets.project, _records(identity, n))
            deadline = time.monotonic() + 60
            while len(service.index) < n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"index saw {len(service.index)} of {n} memories")
                await asyncio.sleep(0.05)

            plain = RecallInput(limit=LIMIT)
            samples = await time_async(
                lambda plain=plain, service=service: service.recall_context(plain), iterations
            )
            results.append(
                summarize(
                    f"pattern recall limit={LIMIT} @{n}",
                    samples,
                    baseline=f"raw kv get @{n}",
                    target=TARGET if n == sizes[-1] else None,
                    extra={"memories": n},
                )
            )
            filtered = RecallInput(limit=LIMIT, tags=["db"], search="gamma", priority_min=3)
            samples = await time_async(
                lambda filtered=filtered, service=service: service.recall_context(filtered), iterations
            )
            results.append(
                summarize(f"pattern recall filtered limit={LIMIT} @{n}", samples, baseline=f"raw kv get @{n}")
            )
            if n == sizes[-1]:
                for limit in (10, 200):
                    req = RecallInput(limit=limit)
                    samples = await time_async(
                        lambda req=req, service=service: service.recall_context(req), iterations
                    )
                    results.append(
                        summarize(f"pattern recall limit={limit} @{n}", samples, baseline=f"raw kv get @{n}")
                    )
                results.append(await _mcp_recall(service, n, iterations))

            kv = await js.key_value(service.buckets.project)
            sample_keys = random.Random(1).sample(keys, min(len(keys), 50))
            counter = iter(range(10**9))

            async def raw_get(kv=kv, sample_keys=sample_keys, counter=counter) -> None:
                await kv.get(sample_keys[next(counter) % len(sample_keys)])

            results.append(summarize(f"raw kv get @{n}", await time_async(raw_get, iterations)))

            async def raw_scan(bucket: str = service.buckets.project) -> None:
                temp = MemoryIndex()
                watch = BucketWatch(js, bucket, ">", temp)
                await watch.start()
                await watch.ready.wait()
                await watch.stop()

            scans = await time_async(raw_scan, ctx.iterations(5, 2), warmup=1)
            results.append(
                summarize(
                    f"raw full bucket scan @{n}",
                    scans,
                    extra={"what": "ordered consumer over every key: recall cost without the index"},
                )
            )

            fresh = MemoryService(nc, identity, config)
            started = time.perf_counter()
            await fresh.start()
            load_ms = (time.perf_counter() - started) * 1000
            results.append(
                BenchResult(name=f"pattern index load at start @{n}", unit="ms", samples=1, value=load_ms)
            )
            await fresh.close()
            await service.close()
            for bucket in (service.buckets.project, service.buckets.user):
                await js.delete_key_value(bucket)
    finally:
        await nc.close()
    return results


async def _mcp_recall(service: MemoryService, n: int, iterations: int) -> BenchResult:
    """The same recall through an in-process MCP session (tool dispatch, validation, JSON)."""
    mounted: MCPServer[object] = MCPServer("pattern-bench", tools=pattern_tools(lambda: service))
    async with Client(mounted) as client:

        async def op() -> None:
            res = await client.call_tool("pattern_recall_context", {"limit": LIMIT})
            assert not res.is_error

        samples = await time_async(op, iterations)
    return summarize(
        f"pattern_recall_context via MCP limit={LIMIT} @{n}", samples, baseline=f"raw kv get @{n}"
    )
