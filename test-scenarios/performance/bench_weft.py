"""Weft under load: a real ``weft serve`` process over the suite's nats-server.

* submit -> claimed: POST /api/work, then an agent (the shared WorkQueue, as Warp
  claims) takes it; vs raw nats-py JetStream publish -> pull fetch -> ack;
* sustained submissions/s over REST with concurrent clients; vs raw
  JetStream publishes with the same concurrency;
* GET /api/agents with 1,000 registered agents; vs reading the registry
  bucket with nats-py (what a listing would cost without Weft's mirror);
* Weft's resident memory with 1,000 agents and 10,000 work records;
* GET /api/work/resolve (a task id, an id prefix) among those records; vs one KV get.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from benchlib import BenchContext, BenchResult, concurrently, summarize, time_async
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import free_port
from shared.work.rules import Claimant
from testsupport.env import without_fabric
from testsupport.processes import rss_mb
from testsupport.work import work_queue

WEFT = str(Path(sys.executable).parent / "weft")
AGENT = "a" * 32


async def start_weft(
    ctx: BenchContext, project: str, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A ``weft serve`` process over the suite's nats-server, healthy; (process, base URL)."""
    port = free_port()
    env = without_fabric()
    env.update(
        NATS_URL=ctx.nats_url,
        WEFT_PROJECT_ID=project,
        WEFT_PORT=str(port),
        WEFT_LOG_LEVEL="WARNING",
        LOOM_DATA_DIR=str(ctx.scratch / "weft-data"),
    )
    env.update(extra_env or {})
    log = (ctx.scratch / "weft.log").open("wb")
    proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child; starting it does not block
        [WEFT, "serve"], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:
        for _ in range(400):
            if proc.poll() is not None:
                raise RuntimeError(f"weft exited with {proc.returncode}; see {ctx.scratch / 'weft.log'}")
            try:
                async with http.get(f"{base}/health") as response:
                    if response.status == 200:
                        return proc, base
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    proc.kill()
    raise RuntimeError("weft did not become healthy")


def stop_weft(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


async def run(ctx: BenchContext) -> list[BenchResult]:
    project = f"bench-weft-{uuid.uuid4().hex[:8]}"
    names = ProjectNames(project)
    nc = await connect(url=ctx.nats_url, name="bench-weft")
    js = nc.jetstream()
    proc, base = await start_weft(ctx, project)
    results: list[BenchResult] = []
    headers = {"X-Loom-Project": project, "Content-Type": "application/json"}
    try:
        # The claiming agent is online (registered as Warp does), so routing finds it: no spin-up.
        await Registry(js, names).put(
            AgentEntry(
                agent_id=AGENT,
                handle="bench-agent",
                agent_type="bench",
                project_id=project,
                user_id="0123456789abcdef",
                capabilities=["bulk", "direct", "latency", "memory"],
                heartbeat_interval_s=3600,
            )
        )
        connector = aiohttp.TCPConnector(limit=64)
        async with aiohttp.ClientSession(base_url=base, headers=headers, connector=connector) as http:
            results += await _latency(ctx, nc, js, names, http)
            submitted, throughput = await _throughput(ctx, js, http)
            results += throughput
            results += await _agents_listing(ctx, js, names, http)
            results.append(await _memory(ctx, nc, names, http, proc, submitted))
            results += await _references(ctx, js, names, http)
    finally:
        stop_weft(proc)
        await nc.close()
    return results


async def _latency(
    ctx: BenchContext, nc: Any, js: Any, names: ProjectNames, http: aiohttp.ClientSession
) -> list[BenchResult]:
    # raw: publish to a work-queue stream, pull it, ack it
    await js.add_stream(
        StreamConfig(
            name="BENCH-WEFT-RAW",
            subjects=["bench.weft.raw"],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
        )
    )
    await js.add_consumer(
        "BENCH-WEFT-RAW", ConsumerConfig(durable_name="raw", ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
    )
    psub = await js.pull_subscribe_bind("raw", stream="BENCH-WEFT-RAW")

    async def raw_once() -> None:
        await js.publish("bench.weft.raw", b'{"work_id":"x"}')
        msgs = await psub.fetch(1, timeout=5)
        await msgs[0].ack_sync()

    raw = await time_async(raw_once, ctx.iterations(300))
    await js.delete_stream("BENCH-WEFT-RAW")

    queue = work_queue(nc, names)
    agent = Claimant(agent_id=AGENT, agent_type="bench", capabilities=("latency",))
    body = WorkSubmission(task_id="lat", description="measure", capability="latency").model_dump_json()

    async def submit_then_claim() -> None:
        async with http.post("/api/work", data=body) as response:
            assert response.status == 201, await response.text()
            work_id = (await response.json())["id"]
        while True:
            item = await queue.claim(agent)
            if item is not None:
                break
        assert item.id == work_id
        await queue.complete(item.id, AGENT)  # not timed: keeps the queue empty between samples

    samples: list[float] = []
    for _ in range(5):
        await submit_then_claim()
    for _ in range(ctx.iterations(300)):
        started = time.perf_counter()
        async with http.post("/api/work", data=body) as response:
            work_id = (await response.json())["id"]
        item = None
        while item is None:
            item = await queue.claim(agent)
        samples.append((time.perf_counter() - started) * 1000)
        assert item.id == work_id
        await queue.complete(item.id, AGENT)

    async def rest_submit() -> None:
        async with http.post("/api/work", data=body) as response:
            assert response.status == 201

    submit_only = await time_async(rest_submit, ctx.iterations(300))
    direct = await time_async(
        lambda: queue.submit(WorkSubmission(task_id="d", description="direct", capability="direct")),
        ctx.iterations(300),
    )
    return [
        summarize("raw: js publish -> pull fetch -> ack", raw),
        summarize(
            "weft: REST submit -> agent claimed",
            samples,
            baseline="raw: js publish -> pull fetch -> ack",
            target="p95 <= 20 ms",
        ),
        summarize("weft: REST submit (201)", submit_only, baseline="raw: js publish -> pull fetch -> ack"),
        summarize(
            "shared: WorkQueue.submit (no HTTP)", direct, baseline="raw: js publish -> pull fetch -> ack"
        ),
    ]


async def _throughput(
    ctx: BenchContext, js: Any, http: aiohttp.ClientSession
) -> tuple[int, list[BenchResult]]:
    total = 200 if ctx.quick else 5000
    concurrency = 32
    body = WorkSubmission(task_id="bulk", description="throughput", capability="bulk").model_dump_json()
    failures: list[int] = []

    async def submit(_: int) -> None:
        async with http.post("/api/work", data=body) as response:
            if response.status != 201:
                failures.append(response.status)
            await response.read()

    await concurrently(20, concurrency, submit)  # warm-up
    elapsed = await concurrently(total, concurrency, submit)
    if failures:
        raise RuntimeError(f"{len(failures)} submissions failed: {sorted(set(failures))}")

    await js.add_stream(
        StreamConfig(name="BENCH-WEFT-TPUT", subjects=["bench.weft.tput"], storage=StorageType.FILE)
    )
    raw_elapsed = await concurrently(
        total, concurrency, lambda _: js.publish("bench.weft.tput", body.encode())
    )
    await js.delete_stream("BENCH-WEFT-TPUT")
    raw = BenchResult(
        name="raw: js publish (acked), 32 concurrent",
        unit="ops",
        samples=total,
        throughput=total / raw_elapsed,
    )
    weft = BenchResult(
        name="weft: REST submissions, 32 concurrent",
        unit="ops",
        samples=total,
        throughput=total / elapsed,
        baseline=raw.name,
        target=">= 500 /s",
        extra={"raw_throughput": total / raw_elapsed},
    )
    return total + 20, [raw, weft]


async def _agents_listing(
    ctx: BenchContext, js: Any, names: ProjectNames, http: aiohttp.ClientSession
) -> list[BenchResult]:
    count = 100 if ctx.quick else 1000
    registry = Registry(js, names)
    sem = asyncio.Semaphore(32)

    async def register(i: int) -> None:
        async with sem:
            await registry.put(
                AgentEntry(
                    agent_id=uuid.uuid4().hex,
                    handle=f"agent-{i:04d}",
                    agent_type="claude-code" if i % 3 else "copilot",
                    project_id=names.project_id,
                    user_id="0123456789abcdef",
                    hostname=f"host-{i % 20}",
                    capabilities=["code", "review"] if i % 2 else ["docs"],
                    boundaries=["default", "corporate"],
                    heartbeat_interval_s=3600,
                )
            )

    await asyncio.gather(*(register(i) for i in range(count)))
    for _ in range(200):
        async with http.get("/api/agents", params={"limit": "1"}) as response:
            if (await response.json())["total"] == count:
                break
        await asyncio.sleep(0.05)

    async def listing(params: dict[str, str]) -> None:
        async with http.get("/api/agents", params=params) as response:
            assert response.status == 200
            await response.read()

    default_page = await time_async(lambda: listing({}), ctx.iterations(300))
    filtered = await time_async(
        lambda: listing({"type": "copilot", "capability": "code"}), ctx.iterations(300)
    )
    everything = await time_async(lambda: listing({"limit": "1000"}), ctx.iterations(100))

    async def raw_read() -> None:
        await registry.list_project()

    raw = await time_async(raw_read, ctx.iterations(50))
    raw_name = f"raw: read registry bucket ({count} entries)"
    return [
        summarize(raw_name, raw),
        summarize(
            f"weft: GET /api/agents, {count} agents (page 50)",
            default_page,
            baseline=raw_name,
            target="p95 <= 25 ms",
        ),
        summarize(f"weft: GET /api/agents filtered, {count} agents", filtered, baseline=raw_name),
        summarize(f"weft: GET /api/agents limit=1000, {count} agents", everything, baseline=raw_name),
    ]


async def _memory(
    ctx: BenchContext,
    nc: Any,
    names: ProjectNames,
    http: aiohttp.ClientSession,
    proc: subprocess.Popen[bytes],
    already: int,
) -> BenchResult:
    records = 500 if ctx.quick else 10_000
    queue = work_queue(nc, names)
    sem = asyncio.Semaphore(64)
    missing = max(0, records - already)

    async def add(i: int) -> None:
        async with sem:
            await queue.submit(
                WorkSubmission(task_id=f"m{i}", description="memory " * 20, capability="memory")
            )

    await asyncio.gather(*(add(i) for i in range(missing)))
    async with http.get("/api/stats") as response:  # every record read (parsed) at least once
        stats = await response.json()
    async with http.get("/api/work", params={"limit": "1000"}) as response:
        await response.read()
    agents = stats["agents"]["total"]
    work = stats["work"]["total"]
    return BenchResult(
        name=f"weft: RSS with {agents} agents, {work} work records",
        unit="MB",
        value=rss_mb(proc.pid),
        target="<= 250 MB",
        extra={"agents": agents, "work_records": work},
    )


async def _references(
    ctx: BenchContext, js: Any, names: ProjectNames, http: aiohttp.ClientSession
) -> list[BenchResult]:
    """What Shuttle asks before a command on an item typed by its task id or the start of its
    id (``GET /api/work/resolve``, shared/refs.py): one pass over Weft's copy of the work
    records (those ``_memory`` left: 500 quick, 10,000 full), beside reading one record."""
    async with http.get("/api/work", params={"limit": "1"}) as response:
        page = await response.json()
    total, newest = page["total"], page["items"][0]
    kv = await js.key_value(names.work_records_bucket)

    async def raw_get() -> None:
        await kv.get(newest["id"])

    async def resolve(ref: str) -> None:
        async with http.get("/api/work/resolve", params={"ref": ref}) as response:
            assert response.status in (200, 422), response.status  # task ids repeat in a bench
            await response.read()

    async def show() -> None:
        async with http.get(f"/api/work/{newest['id']}") as response:
            assert response.status == 200, response.status
            await response.read()

    raw = await time_async(raw_get, ctx.iterations(300, 30))
    shown = await time_async(show, ctx.iterations(300, 30))
    by_prefix = await time_async(lambda: resolve(newest["id"][:8]), ctx.iterations(300, 30))
    by_name = await time_async(lambda: resolve(newest["task_id"]), ctx.iterations(300, 30))
    raw_name = "raw: KV get of one work record"
    return [
        summarize(raw_name, raw),
        summarize(f"weft: GET /api/work/{{id}} in the same phase, {total} items", shown, baseline=raw_name),
        summarize(f"weft: GET /api/work/resolve by id prefix, {total} items", by_prefix, baseline=raw_name),
        summarize(f"weft: GET /api/work/resolve by task id, {total} items", by_name, baseline=raw_name),
    ]
