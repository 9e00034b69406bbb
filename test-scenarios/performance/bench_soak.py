"""Soak: steady load for a long time, agents joining and leaving; does anything drift or leak?

Only runs with ``run.py --soak <duration>`` (e.g. ``make bench BENCH_ARGS="--soak 10m"``).

* a real ``weft serve`` process; work submitted over REST at a steady rate;
* a pool of agents doing what Warp does (registry entry, heartbeats, claim, complete through
  ``shared``), one of them replaced every few seconds (the old one goes offline, a new one
  registers), plus one real Warp process driven over MCP stdio for the whole run;
* an operator listing the online agents over REST four times a second.

The run is cut into windows; per window: submit -> completed latency, completions/s,
``GET /api/agents`` latency, Weft's and Warp's resident memory and the number of work
records. Drift is last window / first full window; memory growth is reported in MB and,
for Weft (which keeps every work record of a project in memory), per 1,000 records. Weft
runs with work-record and offline-agent retentions of a quarter of the run, so after that
the number of records and registry entries levels off and Weft's memory must level off
with it: its growth from then on is the leak check. The operator lists the online agents
(a constant set), so that listing drift is not just a growing answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from benchlib import BenchContext, BenchResult, launch_env, percentile, summarize
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import free_port
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.env import without_fabric
from testsupport.processes import rss_mb
from testsupport.work import work_queue

BIN = Path(sys.executable).parent
RATE_PER_S = 20.0
POOL = 6
CHURN_EVERY_S = 5.0
HEARTBEAT_S = 2.0
CAPABILITY = "soak"
DRIFT_TARGET = 1.5
LIST_EVERY_S = 0.25


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)[:300]


def _rss_mb(pid: int) -> float | None:
    """The process's RSS, None once it has gone (the soak keeps sampling)."""
    try:
        return rss_mb(pid)
    except OSError:
        return None


def _pid_with_env(marker: str) -> int | None:
    wanted = marker.encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    return int(entry.name)
    return None


@dataclass
class Window:
    started: float
    ended: float | None = None
    latencies_ms: list[float] = field(default_factory=list)
    listing_ms: list[float] = field(default_factory=list)
    weft_rss_mb: float | None = None
    warp_rss_mb: float | None = None
    records: int = 0

    def summary(self, at_s: float, length_s: float) -> dict[str, Any]:
        lat, lst = self.latencies_ms, self.listing_ms
        return {
            "t_s": round(at_s, 1),
            "completed": len(lat),
            "completed_per_s": round(len(lat) / length_s, 2),
            "p50_ms": round(percentile(lat, 50), 2) if lat else None,
            "p95_ms": round(percentile(lat, 95), 2) if lat else None,
            "agents_list_p50_ms": round(percentile(lst, 50), 2) if lst else None,
            "weft_rss_mb": None if self.weft_rss_mb is None else round(self.weft_rss_mb, 1),
            "warp_rss_mb": None if self.warp_rss_mb is None else round(self.warp_rss_mb, 1),
            "work_records": self.records,
        }


class Soak:
    def __init__(self, ctx: BenchContext) -> None:
        self.ctx = ctx
        self.duration = ctx.soak_s
        self.window_s = max(5.0, self.duration / 12)
        self.project = f"soak-{uuid.uuid4().hex[:8]}"
        self.retention_s = max(5.0, round(self.duration / 4, 1))
        self.names = ProjectNames(self.project)
        self.submitted: dict[str, float] = {}
        self.completed: dict[str, float] = {}
        self.windows: list[Window] = []
        self.stop = asyncio.Event()
        self.drained = asyncio.Event()
        self.submitting = True
        """Until the submitter has returned: an item whose POST is still in flight when the run
        stops is not in ``submitted`` yet, so nothing may be called drained before then."""
        self.joins = 0
        self.leaves = 0
        self.weft: subprocess.Popen[bytes] | None = None
        self.base = ""
        self.warp_pid: int | None = None
        self.lost_items: list[str] = []
        self.warp_errors: list[str] = []
        """What the real Warp agent was refused (shown with lost items, to say why)."""

    # -- parts ------------------------------------------------------------------------
    async def start_weft(self) -> None:
        port = free_port()
        env = without_fabric()
        env.update(
            NATS_URL=self.ctx.nats_url,
            WEFT_PROJECT_ID=self.project,
            WEFT_PORT=str(port),
            WEFT_LOG_LEVEL="WARNING",
            WEFT_WORK_RETENTION_S=str(self.retention_s),
            WEFT_AGENT_RETENTION_S=str(self.retention_s),
            WEFT_SWEEP_INTERVAL_S="1",
            LOOM_DATA_DIR=str(self.ctx.scratch / "soak-weft"),
        )
        log = (self.ctx.scratch / "soak-weft.log").open("wb")
        self.weft = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child; starting it does not block
            [str(BIN / "weft"), "serve"], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
        self.base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=2) as http:
            for _ in range(400):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{self.base}/health")).status_code == 200:
                        return
                if self.weft.poll() is not None:
                    break
                await asyncio.sleep(0.05)
        raise RuntimeError(f"weft did not start; see {self.ctx.scratch / 'soak-weft.log'}")

    def now(self) -> float:
        return time.monotonic()

    def window(self) -> Window:
        return self.windows[-1]

    def done(self, work_id: str) -> None:
        at = self.now()
        self.completed[work_id] = at
        started = self.submitted.get(work_id)
        if started is not None:
            self.window().latencies_ms.append((at - started) * 1000)
        if len(self.completed) >= len(self.submitted):
            self.check_drained()

    async def submitter(self, http: httpx.AsyncClient) -> None:
        interval = 1 / RATE_PER_S
        due = self.now()
        n = 0
        try:
            while not self.stop.is_set():
                started = self.now()
                response = await http.post(
                    "/api/work",
                    json={"task_id": f"soak-{n}", "description": "soak", "capability": CAPABILITY},
                )
                response.raise_for_status()
                self.submitted[response.json()["id"]] = started
                n += 1
                due += interval
                await asyncio.sleep(max(0.0, due - self.now()))
        finally:
            self.submitting = False
            self.check_drained()

    async def lister(self, http: httpx.AsyncClient) -> None:
        while not self.stop.is_set():
            started = self.now()
            response = await http.get("/api/agents", params={"limit": 200, "status": "online"})
            response.raise_for_status()
            self.window().listing_ms.append((self.now() - started) * 1000)
            await asyncio.sleep(LIST_EVERY_S)

    async def simulated_agent(self, queue: WorkQueue, registry: Registry, leave: asyncio.Event) -> None:
        """What a Warp agent does on NATS: register, heartbeat, claim, complete, go offline."""
        agent_id = uuid.uuid4().hex
        entry = AgentEntry(
            agent_id=agent_id,
            handle=f"soak-{agent_id[:8]}",
            project_id=self.project,
            user_id="0" * 16,
            capabilities=[CAPABILITY],
            heartbeat_interval_s=HEARTBEAT_S,
        )
        await registry.put(entry)
        self.joins += 1
        claimant = Claimant(agent_id=agent_id, agent_type="generic", capabilities=(CAPABILITY,))
        beat = self.now()
        while not leave.is_set():
            item = await queue.claim(claimant)
            if item is not None:
                await queue.complete(item.id, agent_id, {"ok": True})
                self.done(item.id)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(leave.wait(), 0.05)
            if self.now() - beat >= HEARTBEAT_S:
                await registry.heartbeat(agent_id)
                beat = self.now()
        await registry.mark_offline(agent_id)
        self.leaves += 1

    async def pool(self, queue: WorkQueue, registry: Registry) -> None:
        """POOL agents; every CHURN_EVERY_S the oldest leaves and a new one joins."""
        members: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

        def join() -> None:
            leave = asyncio.Event()
            members.append((leave, asyncio.create_task(self.simulated_agent(queue, registry, leave))))

        for _ in range(POOL):
            join()
        try:
            while not self.stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), CHURN_EVERY_S)
                if self.stop.is_set():
                    break
                leave, task = members.pop(0)
                leave.set()
                join()
                await task
        finally:
            await self.drain_then(lambda: self._leave_all(members))

    async def _leave_all(self, members: list[tuple[asyncio.Event, asyncio.Task[None]]]) -> None:
        for leave, _ in members:
            leave.set()
        await asyncio.gather(*(task for _, task in members))

    async def drain_then(self, finish: Callable[[], Awaitable[None]]) -> None:
        """Keep working until every submitted item is done (or 60 s), then ``finish``."""
        self.check_drained()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drained.wait(), 60)
        await finish()

    def check_drained(self) -> None:
        if self.stop.is_set() and not self.submitting and set(self.submitted) <= set(self.completed):
            self.drained.set()

    async def warp_agent(self) -> None:
        """One real Warp process for the whole run, claiming and completing over MCP."""
        agent_id = uuid.uuid4().hex
        home = self.ctx.scratch / "soak-home"
        home.mkdir(exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "NATS_URL": self.ctx.nats_url,
            "LOOM_PROJECT_ID": self.project,
            "LOOM_PROJECT_PATH": str(home),
            "LOOM_AGENT_ID": agent_id,
            "LOOM_CAPABILITIES": CAPABILITY,
            "LOOM_AUTO_REGISTER": "1",
            "LOOM_HEARTBEAT_S": str(HEARTBEAT_S),
            "LOOM_LOG_LEVEL": "WARNING",
            **launch_env(),
        }
        params = StdioServerParameters(command=str(BIN / "warp"), env=env, cwd=str(home))
        with (self.ctx.scratch / "soak-warp.stderr").open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self.warp_pid = _pid_with_env(f"LOOM_AGENT_ID={agent_id}")
                idle = False
                while not (self.drained.is_set() and idle):
                    out = await session.call_tool("warp_work_claim", {})
                    content = out.structured_content or {}
                    if out.is_error:
                        self.warp_errors.append(f"claim: {_text(out)}")
                    if out.is_error or not content.get("claimed"):
                        idle = True
                        if self.stop.is_set() and self.now() > self.stopped_at + 60:
                            break
                        await asyncio.sleep(0.05)
                        continue
                    idle = False
                    work_id = content["item"]["id"]
                    for _ in range(3):  # as an agent would: a refused completion is tried again
                        done = await session.call_tool("warp_work_complete", {"work_id": work_id})
                        if not done.is_error:
                            self.done(work_id)
                            break
                        self.warp_errors.append(f"complete: {_text(done)}")

    async def sampler(self, nc: Any) -> None:
        """Close a window every window_s: memory and record counts at its end."""
        kv = await nc.jetstream().key_value(self.names.work_records_bucket)
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.window_s)
            current = self.window()
            current.ended = self.now()
            assert self.weft is not None
            current.weft_rss_mb = _rss_mb(self.weft.pid)
            current.warp_rss_mb = _rss_mb(self.warp_pid) if self.warp_pid else None
            status = await kv.status()
            current.records = int(status.values)
            print(
                f"# soak {self.now() - self.t0:6.1f}s: "
                + str(current.summary(self.now() - self.t0, self.window_s)),
                file=sys.stderr,
                flush=True,
            )
            if not self.stop.is_set():
                self.windows.append(Window(started=self.now()))

    # -- the run ----------------------------------------------------------------------
    async def run(self) -> list[BenchResult]:
        await self.start_weft()
        nc = await connect(url=self.ctx.nats_url, name="bench-soak")
        queue = work_queue(nc, self.names)
        await queue.submit(WorkSubmission(task_id="warm", description="warm-up", capability=CAPABILITY))
        registry = Registry(nc.jetstream(), self.names)
        self.t0 = self.now()
        self.stopped_at = float("inf")
        self.windows.append(Window(started=self.t0))
        try:
            async with httpx.AsyncClient(base_url=self.base, timeout=30) as http:
                tasks = [
                    asyncio.create_task(self.submitter(http), name="submit"),
                    asyncio.create_task(self.lister(http), name="list"),
                    asyncio.create_task(self.pool(queue, registry), name="pool"),
                    asyncio.create_task(self.warp_agent(), name="warp"),
                    asyncio.create_task(self.sampler(nc), name="sample"),
                ]
                finished, _ = await asyncio.wait(
                    tasks, timeout=self.duration, return_when=asyncio.FIRST_EXCEPTION
                )
                for task in finished:
                    task.result()  # a part that failed early fails the soak
                self.stop.set()
                self.stopped_at = self.now()
                await asyncio.gather(*tasks)
        finally:
            for work_id in set(self.submitted) - set(self.completed):  # what a lost item shows
                with contextlib.suppress(Exception):
                    self.lost_items.append(await _lost_item(queue, work_id))
            await nc.close()
            if self.weft is not None and self.weft.poll() is None:
                self.weft.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.weft.wait(20)
                if self.weft.poll() is None:
                    self.weft.kill()
        return self.results()

    def results(self) -> list[BenchResult]:
        full = [
            w
            for w in self.windows
            if w.ended is not None and w.ended - w.started >= 0.9 * self.window_s and w.latencies_ms
        ]
        if not full:
            raise RuntimeError("the soak was too short for one full window")
        summaries = [w.summary((w.ended or w.started) - self.t0, self.window_s) for w in self.windows]
        latencies = [ms for w in self.windows for ms in w.latencies_ms]
        lost = len(set(self.submitted) - set(self.completed))
        # The first window warms up (imports, caches, consumers). Drift compares the pooled samples
        # of the next (up to) three windows with those of the last three: single windows on a
        # shared machine are noisy, a real drift moves the whole tail.
        head = full[1:4] if len(full) > 2 else full[:1]
        tail = full[-3:] if len(full) > 2 else full[-1:]
        first, last = head[0], tail[-1]

        def pooled(windows: list[Window], attr: str) -> list[float]:
            return [ms for w in windows for ms in getattr(w, attr)]

        def ratio(attr: str) -> float | None:
            before, after = pooled(head, attr), pooled(tail, attr)
            return percentile(after, 50) / percentile(before, 50) if before and after else None

        drift = ratio("latencies_ms")
        listing_drift = ratio("listing_ms")
        records = max(1, last.records - first.records)
        weft_growth = (last.weft_rss_mb or 0) - (first.weft_rss_mb or 0)
        warp_growth = (
            (last.warp_rss_mb or 0) - (first.warp_rss_mb or 0)
            if last.warp_rss_mb is not None and first.warp_rss_mb is not None
            else None
        )
        elapsed = self.stopped_at - self.t0
        common = {
            "duration_s": round(elapsed, 1),
            "rate_per_s": RATE_PER_S,
            "pool": POOL,
            "churn_every_s": CHURN_EVERY_S,
            "joins": self.joins,
            "leaves": self.leaves,
        }
        return [
            summarize(
                "soak: submit->completed (whole run)",
                latencies,
                extra={
                    **common,
                    "windows": summaries,
                    "submitted": len(self.submitted),
                    "lost": lost,
                    "lost_items": self.lost_items,
                    "warp_errors": self.warp_errors[:20],
                },
            ),
            BenchResult(
                name="soak: completions/s",
                unit="ops",
                samples=len(self.completed),
                throughput=len(self.completed) / elapsed,
            ),
            BenchResult(name="soak: lost items", unit="n", value=float(lost), target="0"),
            BenchResult(
                name="soak: latency drift (p50 end/start)",
                unit="x",
                value=drift,
                target=f"<= {DRIFT_TARGET}",
                extra={
                    "start_p50_ms": percentile(pooled(head, "latencies_ms"), 50),
                    "end_p50_ms": percentile(pooled(tail, "latencies_ms"), 50),
                },
            ),
            BenchResult(
                name="soak: GET /api/agents drift (p50 end/start)",
                unit="x",
                value=listing_drift,
                target=f"<= {DRIFT_TARGET}",
            ),
            BenchResult(
                name="soak: weft RSS growth",
                unit="MB",
                value=weft_growth,
                extra={
                    "first_mb": first.weft_rss_mb,
                    "last_mb": last.weft_rss_mb,
                    "records_added": records,
                    "mb_per_1k_records": weft_growth * 1000 / records,
                    "mb_per_min": weft_growth * 60 / max(1.0, last.ended - first.ended)
                    if last.ended and first.ended
                    else None,
                },
            ),
            BenchResult(name="soak: warp RSS growth", unit="MB", value=warp_growth, target="flat (no leak)"),
            self.steady_weft_growth(full),
        ]

    def steady_weft_growth(self, full: list[Window]) -> BenchResult:
        """Weft's RSS growth over the windows after retention began deleting records."""
        steady = [w for w in full if w.started - self.t0 >= self.retention_s + self.window_s]
        name = "soak: weft RSS growth once records level off"
        if len(steady) < 2 or steady[0].weft_rss_mb is None or steady[-1].weft_rss_mb is None:
            return BenchResult(name=name, unit="MB", target="flat (no leak)", extra={"windows": len(steady)})
        return BenchResult(
            name=name,
            unit="MB",
            value=steady[-1].weft_rss_mb - steady[0].weft_rss_mb,
            target="flat (no leak)",
            extra={
                "retention_s": self.retention_s,
                "windows": len(steady),
                "first_mb": steady[0].weft_rss_mb,
                "last_mb": steady[-1].weft_rss_mb,
                "records_min": min(w.records for w in steady),
                "records_max": max(w.records for w in steady),
            },
        )


async def run(ctx: BenchContext) -> list[BenchResult]:
    if ctx.soak_s <= 0:
        return []
    return await Soak(ctx).run()


async def _lost_item(queue: WorkQueue, work_id: str) -> str:
    """A lost item as the next engineer needs it: its state, its queue message (still in the
    stream or not) and what its subject's consumer says it has pending and in flight."""
    record = await queue.get_record(work_id)
    item = record.item
    said = f"{work_id[:8]} {item.status.value} by {item.assigned_to} queue_seq={record.queue_seq}"
    js = queue._js
    if record.queue_seq is not None:
        try:
            stored = await js.get_msg(queue.names.work_stream, record.queue_seq)
            said += f" message on {stored.subject}"
        except Exception as exc:
            said += f" message gone ({type(exc).__name__})"
    subject = queue._subject_of(item)
    try:
        info = await js.consumer_info(queue.names.work_stream, queue.names.work_consumer(subject))
        said += (
            f"; consumer pending={info.num_pending} in_flight={info.num_ack_pending}"
            f" redelivered={info.num_redelivered} waiting_pulls={info.num_waiting}"
        )
    except Exception as exc:
        said += f"; consumer unreadable ({type(exc).__name__})"
    return said
