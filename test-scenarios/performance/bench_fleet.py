"""A fleet of real agents on one machine: N Warp processes (10, 50, 100, 200) attached to one
Weft, each registered and heartbeating, driven over MCP stdio from this one process.

Each size gets a fabric of its own (a nats-server and a ``weft serve`` process), so the idle
figures are that fleet's alone. Per size:

* **cold start**: all N spawned at once -> all N ready (``warp_registry_get_info``) and
  listed online by Weft (``GET /api/agents?status=online``). On two cores this is mostly N
  Python processes importing the MCP SDK side by side.
* **memory**: RSS and PSS (shared pages divided among the processes that map them) of each
  Warp process, the median and the largest, once the fleet is up and again after the load.
* **idle CPU**: Weft's, nats-server's and one Warp's (the mean) share of one core over a
  window in which nothing but heartbeats happens.
* **claims**: 10·N items (at least 500 for the paced runs of the full sizes) submitted
  through Weft's REST API, then claimed and completed two ways: eight claims at a time
  spread over all N agents (the latency with N agents live and contending, at the same
  offered load for every N) and every agent at once in a closed loop
  (the whole fleet draining the queue: its latency is N / throughput, queueing included).
  The raw baseline does the same with N nats-py connections and the work queue Warp uses;
  its paced run goes twice, before the Warps' claims and after all their load, because its
  p50 moves from run to run.
* **floor**: the same eight-at-a-time pattern with a no-op tool call (no NATS) in place of
  the claim and the completion: what MCP stdio costs with N agents live. The claim's own
  cost is its p50 less the floor's, as a multiple of the raw claim's p50 (the project's
  measure of Warp's cost, as in ``bench_warp``), against each of the two raw runs, and
  again side by side: rounds of a raw block, a floor block and a Warp block, the median of
  each round's own cost (the raw p50 moves between minutes; within a round all three meet
  the same machine), and the same at p99 over all the rounds' samples pooled. The same
  rounds hold a second raw baseline, N raw agents (``raw_agent.py``: processes with one
  connection and the work queue each, forked from one parent, driven over pipes as the
  Warps are) less their own no-op call: the queue's work when, as with the Warps, each
  process serves one claim in N; the own cost against it, and each side's CPU per claim.
* **messages**: a DM (send -> the recipient's read) and a channel message (send -> visible to
  another agent) between random pairs, one at a time, with N agents live.
* **false offline**: ``agent.offline`` events Weft published while every agent was alive;
  anything but 0 is a bug.
* **the same fleet forked from a zygote** (``warp --zygote``, docs/warp.md): once the fleet
  above has stopped, N Warps started through one pre-imported parent: cold start, memory
  (each Warp's RSS and PSS: the parent's imports are shared pages) and the CPU the N
  Warps used to start, against the same N started on their own; each start's row also
  gives the CPU Weft and nats-server used meanwhile.

``run.py`` draws the ``... @ N agents`` rows as scale curves (per-agent cost, growth check).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_warp import TARGET_OWN, RawRpc, own_cost, warp_env
from benchlib import BenchContext, BenchResult, percentile, summarize

from shared.names import ProjectNames, kv_stream
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, ServerConfig
from testsupport.processes import cpu_seconds, holding_pipes, memory_mb
from testsupport.zygote import start_zygote
from warp.stdio import pipe_streams
from warp.zygote import ZYGOTE_ENV
from weft.settings import WeftSettings

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "test-scenarios") not in sys.path:
    sys.path.insert(0, str(ROOT / "test-scenarios"))

from scenario_harness.drills import WeftProcess  # noqa: E402

PROJECT = "fleet"
WEFT_ENV = {
    "WEFT_PROJECT_ID": PROJECT,
    "WEFT_LOG_LEVEL": "WARNING",
    # Weft's own defaults, not the drills' short intervals: the idle figures are production's.
    "WEFT_SWEEP_INTERVAL_S": str(WeftSettings.model_fields["sweep_interval_s"].default),
    "WEFT_STALE_CHECK_INTERVAL_S": str(WeftSettings.model_fields["stale_check_interval_s"].default),
}
SIZES = (10, 50, 100, 200)
QUICK_SIZES = (2, 4)
PACED_CLAIMERS = 8
READY_POLLS = 2400  # 0.05 s apart: two minutes for a Warp to connect and register
CHANNEL = "roadmap"  # one of the channels every project has
ITEMS_PER_AGENT = 10
PACED_MIN_ITEMS = 500
"""The paced runs of the full sizes do at least this many claims: with 10·N (100 at ten
agents) their p50 moved by a fifth from run to run of the same code."""
TARGET_MS = "p99 <= 50 ms"
TARGET_RSS = "<= 60 MB each"
TARGET_IDLE = "Weft <= 5% of one core"
FLOOR_ROW = f"fleet: floor, a no-op call {PACED_CLAIMERS} at a time over all agents"


# -- the fleet ------------------------------------------------------------------------


@dataclass
class Agent:
    agent_id: str
    rpc: RawRpc
    cursor: str | None = None

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.rpc.tool(tool, args)


@dataclass
class Fleet:
    """N Warp processes, each an MCP session over its stdio, all driven from this process by a
    bare JSON-RPC client (the SDK's client re-validates every result: with N sessions in one
    process that work, not Warp's, would fill the driver's core)."""

    ctx: BenchContext
    nats_url: str
    agents: list[Agent] = field(default_factory=list)
    errlog: Any = None
    extra_env: dict[str, str] = field(default_factory=dict)

    async def start(self, n: int) -> None:
        self.errlog = errlog = (self.ctx.scratch / "fleet-warps.stderr").open("a")

        async def one(i: int) -> Agent:
            agent_id = uuid.uuid4().hex
            env = warp_env(self.ctx, PROJECT, agent_id, f"fleet-{i}") | {"NATS_URL": self.nats_url}
            env |= self.extra_env
            agent = Agent(agent_id, await RawRpc.start(env, errlog))
            self.agents.append(agent)
            for _ in range(READY_POLLS):  # registered and connected: its info answers
                answer = await agent.rpc.request(
                    "tools/call", {"name": "warp_registry_get_info", "arguments": {}}
                )
                if not answer.get("isError"):
                    return agent
                await asyncio.sleep(0.05)
            raise RuntimeError(f"fleet: Warp fleet-{i} did not become ready")

        await asyncio.gather(*(one(i) for i in range(n)))

    async def stop(self) -> None:
        await asyncio.gather(*(a.rpc.close() for a in self.agents), return_exceptions=True)
        if self.errlog is not None:
            self.errlog.close()

    @property
    def pids(self) -> list[int]:
        return [a.rpc.pid for a in self.agents]


async def _online(weft: WeftProcess, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with weft.running_weft.client(PROJECT) as api:
        while True:
            listed = (await api.get("/api/agents", params={"status": "online", "limit": 1000})).json()
            if len(listed["items"]) >= n:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"fleet: {len(listed['items'])} of {n} agents online after {timeout:g} s")
            await asyncio.sleep(0.1)


async def _submit(weft: WeftProcess, count: int, tag: str) -> None:
    async with weft.running_weft.client(PROJECT) as api:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(count):
            queue.put_nowait(i)

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                body = {"task_id": f"{tag}-{i}", "description": "fleet bench", "capability": "code"}
                response = await api.post("/api/work", json=body)
                assert response.status_code == 201, response.text

        await asyncio.gather(*(worker() for _ in range(16)))


@dataclass(frozen=True)
class ClaimMode:
    """How the claims run: ``PACED_CLAIMERS`` loops, each through the next agent in turn (the
    same offered load at every N), or one loop per agent, all at once (the fleet draining
    the queue)."""

    phase: str
    fleet_row: str
    raw_row: str
    paced: bool
    extra: dict[str, str] = field(default_factory=dict)

    def workers(self, n: int) -> int:
        return PACED_CLAIMERS if self.paced else n

    def items(self, n: int) -> int:
        """10·N items, and for a paced run of a full size at least ``PACED_MIN_ITEMS``."""
        least = PACED_MIN_ITEMS if self.paced and n >= min(SIZES) else 0
        return max(ITEMS_PER_AGENT * n, least)


CLAIM_MODES = (
    ClaimMode(
        f"claims, {PACED_CLAIMERS} at a time",
        f"fleet: claim, {PACED_CLAIMERS} at a time over all agents",
        f"raw: claim, {PACED_CLAIMERS} at a time over N connections",
        paced=True,
    ),
    ClaimMode(
        "claims, every agent at once",
        "fleet: claim, every agent at once",
        "raw: claim, every connection at once",
        paced=False,
        extra={"why": "closed loop: latency is N / throughput, queueing included"},
    ),
)

PACED = CLAIM_MODES[0]
"""The paced mode, whose pattern the floor, the raw run before the claims and the own cost follow."""

Claim = Callable[[int], Awaitable[str | None]]
Finish = Callable[[int, str], Awaitable[None]]


async def _drain(
    total: int, n: int, mode: ClaimMode, claim: Claim, finish: Finish
) -> tuple[list[float], float]:
    """Claims and completions in ``mode`` until ``total`` items are done; the claim
    latencies and the wall time."""
    done = 0
    samples: list[float] = []
    turn = 0

    async def loop(worker: int) -> None:
        nonlocal done, turn
        empty = 0
        while done < total:
            k = turn if mode.paced else worker
            turn += 1
            start = time.perf_counter()
            item = await claim(k)
            if item is None:  # the queue's no-wait pull can miss an item a moment old
                empty += 1
                assert empty < 2000, "fleet: claims keep coming back empty"
                await asyncio.sleep(0.01)
                continue
            samples.append((time.perf_counter() - start) * 1000)
            await finish(k, item)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in range(mode.workers(n))))
    return samples, time.perf_counter() - started


async def _warm(n: int, claim: Claim, finish: Finish) -> None:
    """Untimed, each of the N agents (or connections) claims and completes one of N items
    queued for it: their first claim and completion (Warp's first use of those tools, a
    connection's first requests, the subject's consumer made) are a start-up cost, not what
    a claim costs in a running fleet."""

    async def one(k: int) -> None:
        for _ in range(2000):
            item = await claim(k)
            if item is not None:
                await finish(k, item)
                return
            await asyncio.sleep(0.01)
        raise RuntimeError(f"fleet: agent {k} found nothing to claim while warming up")

    await asyncio.gather(*(one(k) for k in range(n)))


async def _warm_fleet(fleet: Fleet, weft: WeftProcess, n: int) -> None:
    """:func:`_warm` through every Warp, and each one's no-op call (the floor's) once."""
    await _submit(weft, n, "warm")
    await _warm(n, *_warp_claims(fleet, n))
    await asyncio.gather(*(agent.call("warp_handle_get") for agent in fleet.agents))


def _claims_through(rpcs: list[RawRpc], claim_tool: str, complete_tool: str) -> tuple[Claim, Finish]:
    """A claim through the k-th process (its item's id, None when it got none) and its completion."""
    n = len(rpcs)

    async def claim(k: int) -> str | None:
        got = await rpcs[k % n].tool(claim_tool)
        return str(got["item"]["id"]) if got["claimed"] else None

    async def finish(k: int, item: str) -> None:
        await rpcs[k % n].tool(complete_tool, {"work_id": item})

    return claim, finish


def _noops_through(rpcs: list[RawRpc], tool: str) -> tuple[Claim, Finish]:
    """The floor's pair in place of the claim's: a no-op call (no NATS; timed) through the
    k-th process, then another for the completion."""
    n = len(rpcs)

    async def noop(k: int) -> str:
        await rpcs[k % n].tool(tool)
        return "-"

    async def again(k: int, _: str) -> None:
        await noop(k)

    return noop, again


def _warp_claims(fleet: Fleet, n: int) -> tuple[Claim, Finish]:
    """A claim through the k-th of the first ``n`` agents and its completion."""
    return _claims_through([agent.rpc for agent in fleet.agents[:n]], "warp_work_claim", "warp_work_complete")


def _warp_noops(fleet: Fleet, n: int) -> tuple[Claim, Finish]:
    """The floor's pair through the k-th of the first ``n`` agents (``warp_handle_get``)."""
    return _noops_through([agent.rpc for agent in fleet.agents[:n]], "warp_handle_get")


async def _claims_mcp(fleet: Fleet, weft: WeftProcess, n: int, mode: ClaimMode) -> tuple[list[float], float]:
    total = mode.items(n)
    await _submit(weft, total, "paced" if mode.paced else "all")
    return await _drain(total, n, mode, *_warp_claims(fleet, n))


async def _floor_mcp(fleet: Fleet, n: int) -> tuple[list[float], float]:
    """The MCP stdio floor in the paced claims' pattern: the same workers and agents."""
    return await _drain(PACED.items(n), n, PACED, *_warp_noops(fleet, n))


RAW_BEFORE = ", before the fleet's claims"
"""The paced raw baseline runs twice, before the Warps' claims and after all their load: the
raw p50 moves from run to run (11 to 26 ms), so the own cost is given against both."""


def own_claim_costs(results: list[BenchResult], n: int) -> list[BenchResult]:
    """The paced claim's own cost above the floor (``bench_warp.own_cost``), here with N
    agents live and eight claims contending, against the raw baseline after the fleet's
    load and against the one before its claims."""
    by_name = {r.name: r for r in results}
    rows = (
        own_cost(
            f"fleet: claim's own cost above the floor{against}, {PACED_CLAIMERS} at a time @ {n} agents",
            by_name.get(f"{PACED.fleet_row} @ {n} agents"),
            by_name.get(f"{FLOOR_ROW} @ {n} agents"),
            by_name.get(f"{PACED.raw_row}{before} @ {n} agents"),
        )
        for against, before in (("", ""), (", against raw before the claims", RAW_BEFORE))
    )
    return [row for row in rows if row is not None]


class RawQueues:
    """N nats-py connections and the project's work queue, as Warp uses it: the raw baseline."""

    def __init__(self, nats_url: str, n: int) -> None:
        self.nats_url, self.n = nats_url, n
        self.names = ProjectNames(f"{PROJECT}-raw-{uuid.uuid4().hex[:6]}")
        self.clients: list[Any] = []
        self.queues: list[Any] = []
        self.claimants: list[Any] = []
        self.submitted = 0

    async def __aenter__(self) -> RawQueues:
        from shared.work.rules import Claimant
        from testsupport.work import work_queue

        self.clients = [await connect(url=self.nats_url, name=f"fleet-raw-{i}") for i in range(self.n)]
        self.queues = [work_queue(nc, self.names) for nc in self.clients]
        self.claimants = [
            Claimant(agent_id=uuid.uuid4().hex, agent_type="generic", capabilities=("code",))
            for _ in self.clients
        ]
        return self

    async def __aexit__(self, *_: object) -> None:
        await asyncio.gather(*(nc.close() for nc in self.clients))

    async def submit(self, count: int) -> None:
        from shared.models import WorkSubmission

        for _ in range(count):
            self.submitted += 1
            await self.queues[0].submit(
                WorkSubmission(task_id=f"raw-{self.submitted}", description="fleet bench", capability="code")
            )

    async def claim(self, k: int) -> str | None:
        got = await self.queues[k % self.n].claim(self.claimants[k % self.n])
        return None if got is None else got.id

    async def finish(self, k: int, item: str) -> None:
        await self.queues[k % self.n].complete(item, self.claimants[k % self.n].agent_id)

    async def drain(self, total: int, mode: ClaimMode) -> tuple[list[float], float]:
        return await _drain(total, self.n, mode, self.claim, self.finish)


RAW_AGENT = Path(__file__).resolve().parent / "raw_agent.py"


@dataclass
class RawAgents:
    """N raw agents (``raw_agent.py``): each a process with one nats-py connection and the
    work queue Warp uses, in the fleet's project, driven over a pair of pipes as the Warps
    are over their stdio. The raw baseline spread over processes as the agents are: each
    serves one claim in N, where :class:`RawQueues` keeps N connections in this one warm
    process. They are forked from one parent that imported what they need (200 of them fit
    beside 200 Warps; forked Warps cost what Warps of their own do per claim, performance.md)."""

    nats_url: str
    errlog: Any
    rpcs: list[RawRpc] = field(default_factory=list)
    parent: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> RawAgents:
        return self

    async def __aexit__(self, *_: object) -> None:
        await asyncio.gather(*(rpc.close() for rpc in self.rpcs), return_exceptions=True)
        if self.parent is not None:  # it ends when its agents have
            await self.parent.wait()

    async def start(self, n: int) -> None:
        requests = [os.pipe() for _ in range(n)]  # driver -> agent
        answers = [os.pipe() for _ in range(n)]  # agent -> driver
        theirs = [(request[0], answer[1]) for request, answer in zip(requests, answers, strict=True)]
        try:
            self.parent = await asyncio.create_subprocess_exec(
                sys.executable,
                str(RAW_AGENT),
                self.nats_url,
                PROJECT,
                *(f"{r},{w}" for r, w in theirs),
                pass_fds=[fd for pair in theirs for fd in pair],
                stdout=asyncio.subprocess.PIPE,
                stderr=self.errlog,
                cwd=ROOT,
            )
        finally:
            for r, w in theirs:
                os.close(r)
                os.close(w)
        assert self.parent.stdout is not None
        pids = [int(pid) for pid in (await self.parent.stdout.readline()).split()]
        if len(pids) != n:  # the agents that did start end as their requests' pipes close
            for (_, to_agent), (from_agent, _) in zip(requests, answers, strict=True):
                os.close(to_agent)
                os.close(from_agent)
            raise RuntimeError(f"fleet: {len(pids)} of {n} raw agents started; see {self.errlog.name}")
        for pid, (_, to_agent), (from_agent, _) in zip(pids, requests, answers, strict=True):
            self.rpcs.append(RawRpc(*await pipe_streams(from_agent, to_agent, limit=16 * 1024 * 1024), pid))

    def claims(self) -> tuple[Claim, Finish]:
        return _claims_through(self.rpcs, "claim", "complete")

    def noops(self) -> tuple[Claim, Finish]:
        return _noops_through(self.rpcs, "noop")

    @property
    def pids(self) -> list[int]:
        return [rpc.pid for rpc in self.rpcs]


async def _claims_raw(nats_url: str, n: int, mode: ClaimMode) -> tuple[list[float], float]:
    """The same with N nats-py connections and the project's work queue, as Warp uses it."""
    async with RawQueues(nats_url, n) as raw:
        await raw.submit(n)
        await _warm(n, raw.claim, raw.finish)
        total = mode.items(n)
        await raw.submit(total)
        return await raw.drain(total, mode)


ALTERNATING_ROW = f"fleet: claim's own cost above the floor, alternating with raw, {PACED_CLAIMERS} at a time"
ALTERNATING_ROUNDS = 7
ALTERNATING_BLOCK = 100
"""Claims per block of the alternating rounds (and no-op pairs for the floor's block)."""
SETTLE_S = 0.5
"""Before each block: what the previous one left behind (a task count settling, spans
waiting to be published, Weft reading the last changes) is done by then."""


ALTERNATING_P99_ROW = (
    f"fleet: claim's own cost above the floor at p99, alternating with raw, {PACED_CLAIMERS} at a time"
)
APART_ROW = (
    f"fleet: claim's own cost above the floor, against raw agent processes, alternating, "
    f"{PACED_CLAIMERS} at a time"
)
APART_P99_ROW = (
    f"fleet: claim's own cost above the floor at p99, against raw agent processes, alternating, "
    f"{PACED_CLAIMERS} at a time"
)
PARTS = ("raw", "apart", "apart floor", "floor", "claim")
"""An alternating round's blocks: raw in this process, raw agent processes and their no-op,
Warp's no-op and Warp's claim (in this order, then the reverse in the next round)."""
MAIN_PARTS = ("raw", "floor", "claim")
"""Those of the own cost against raw in this process."""


async def _alternating(
    fleet: Fleet, weft: WeftProcess, nats_url: str, n: int, quick: bool
) -> list[BenchResult]:
    """The paced claim's own cost, its parts measured side by side: rounds of a block of each
    of :data:`PARTS` (the order reversed every other round), each round's own cost from its
    own p50s, and the median over the rounds. The raw p50 moves by half from minute to minute
    on this machine; within a round all parts meet the same machine. The same at p99, over
    every round's samples pooled (a block of 100 has no p99 of its own): the issue's p99
    goal, held to the rule the project holds Warp to.

    Against two raw baselines: N connections in this process (:class:`RawQueues`), and N
    raw agent processes less their own no-op (:class:`RawAgents`): what the same queue work
    costs when, like each Warp, a process serves one claim in N."""
    rounds, block = (2, 3 * PACED_CLAIMERS) if quick else (ALTERNATING_ROUNDS, ALTERNATING_BLOCK)
    p50s: dict[str, list[float]] = {part: [] for part in PARTS}
    pooled: dict[str, list[float]] = {part: [] for part in PARTS}
    cpu = dict.fromkeys(PARTS, 0.0)
    async with RawQueues(nats_url, n) as raw, RawAgents(nats_url, fleet.errlog) as apart:
        await apart.start(n)
        # Each block's items are queued just before it (a block's last claims may overrun it
        # by a few), so neither queue holds the other's backlog while it is measured.
        blocks: dict[str, tuple[Claim, Finish]] = {
            "raw": (raw.claim, raw.finish),
            "apart": apart.claims(),
            "apart floor": apart.noops(),
            "floor": _warp_noops(fleet, n),
            "claim": _warp_claims(fleet, n),
        }
        warps = sorted(holding_pipes({agent.rpc.input_pipe for agent in fleet.agents}))  # forked or not
        pids: dict[str, list[int]] = {
            "apart": apart.pids,
            "apart floor": apart.pids,
            "floor": warps,
            "claim": warps,
        }
        # Not counted: the raw project's first claims (its consumer made, its connections'
        # first requests) made the first round's raw p50 1.5 to 3.4 times the others'; and
        # each raw agent's first claim, as each Warp's was (_warm_fleet).
        await raw.submit(block + PACED_CLAIMERS)
        await raw.drain(block, PACED)
        await _submit(weft, n, "warm-apart")
        await _warm(n, *blocks["apart"])
        for r in range(rounds):
            for part in PARTS if r % 2 == 0 else PARTS[::-1]:
                if part == "raw":
                    await raw.submit(block + PACED_CLAIMERS)
                elif part in ("claim", "apart"):
                    await _submit(weft, block + PACED_CLAIMERS, f"alternating-{part}-{r}")
                await asyncio.sleep(SETTLE_S)
                before = sum(cpu_seconds(pid) for pid in pids.get(part, ()))
                samples, _ = await _drain(block, n, PACED, *blocks[part])
                cpu[part] += sum(cpu_seconds(pid) for pid in pids.get(part, ())) - before
                p50s[part].append(percentile(samples, 50))
                pooled[part] += samples
    raw_apart = [c - f for c, f in zip(p50s["apart"], p50s["apart floor"], strict=True)]
    own = [c - f for c, f in zip(p50s["claim"], p50s["floor"], strict=True)]
    ratios = [o / w for o, w in zip(own, p50s["raw"], strict=True)]
    apart_ratios = [o / w for o, w in zip(own, raw_apart, strict=True)]
    p99 = {part: percentile(samples, 99) for part, samples in pooled.items()}
    # Each process's CPU per claim and completion, above that per pair of its no-op calls.
    per_pair = {part: 1000 * cpu[part] / len(pooled[part]) for part in pids}
    cpu_ms = {
        "Warps' CPU per claim + completion (ms)": round(per_pair["claim"] - per_pair["floor"], 2),
        "raw agents' CPU per claim + completion (ms)": round(per_pair["apart"] - per_pair["apart floor"], 2),
    }
    return [
        BenchResult(
            f"{ALTERNATING_ROW} @ {n} agents",
            unit="x raw",
            value=statistics.median(ratios),
            target=TARGET_OWN,
            extra={
                "why": f"median over {rounds} rounds of {block} claims each: raw, floor, Warp side by side",
                "per round": [round(x, 2) for x in ratios],
                **{f"{part} p50 per round": [round(x, 1) for x in p50s[part]] for part in MAIN_PARTS},
            },
        ),
        BenchResult(
            f"{ALTERNATING_P99_ROW} @ {n} agents",
            unit="x raw",
            value=(p99["claim"] - p99["floor"]) / p99["raw"],
            target=TARGET_OWN,
            extra={
                "why": f"p99 over {rounds} rounds' samples pooled: (claim - floor) / raw",
                **{f"{part} p99 (ms)": round(p99[part], 1) for part in MAIN_PARTS},
                **{f"{part} samples": len(pooled[part]) for part in MAIN_PARTS},
            },
        ),
        BenchResult(
            f"{APART_ROW} @ {n} agents",
            unit="x raw",
            value=statistics.median(apart_ratios),
            target=TARGET_OWN,
            extra={
                "why": (
                    f"median over {rounds} rounds of {block} claims each: (claim - floor) / "
                    "(raw agent's claim - its no-op), all side by side"
                ),
                "per round": [round(x, 2) for x in apart_ratios],
                "raw agents / raw in one process, per round": [
                    round(a / w, 2) for a, w in zip(raw_apart, p50s["raw"], strict=True)
                ],
                **{f"{part} p50 per round": [round(x, 1) for x in p50s[part]] for part in PARTS},
                **cpu_ms,
            },
        ),
        BenchResult(
            f"{APART_P99_ROW} @ {n} agents",
            unit="x raw",
            value=(p99["claim"] - p99["floor"]) / (p99["apart"] - p99["apart floor"]),
            target=TARGET_OWN,
            extra={
                "why": f"p99 over {rounds} rounds' samples pooled: (claim - floor) / (raw agent - its no-op)",
                **{f"{part} p99 (ms)": round(p99[part], 1) for part in PARTS},
            },
        ),
    ]


async def _catch_up(reader: Agent) -> None:
    """Move the reader's cursor past every message on the channel."""
    while True:
        arguments = (
            {"channel": CHANNEL} if reader.cursor is None else {"channel": CHANNEL, "cursor": reader.cursor}
        )
        page = await reader.call("warp_channels_read", arguments)
        reader.cursor = page["next_cursor"]
        if not page["has_more"]:
            return


async def _messages(fleet: Fleet, rounds: int) -> tuple[list[float], list[float]]:
    agents = fleet.agents
    rng = random.Random(7)
    dm: list[float] = []
    channel: list[float] = []
    for _ in range(rounds):
        sender, reader = rng.sample(agents, 2)
        start = time.perf_counter()
        await sender.call("warp_messages_send_direct", {"recipient_id": reader.agent_id, "message": "hi"})
        page = await reader.call("warp_messages_read_direct", {"limit": 10})
        dm.append((time.perf_counter() - start) * 1000)
        assert len(page["messages"]) == 1, page

        sender, reader = rng.sample(agents, 2)
        await _catch_up(reader)  # what others sent since this reader last read: not timed
        start = time.perf_counter()
        sent = await sender.call("warp_channels_send", {"channel": CHANNEL, "message": "hi"})
        page = await reader.call("warp_channels_read", {"channel": CHANNEL, "cursor": reader.cursor})
        channel.append((time.perf_counter() - start) * 1000)
        assert [m["seq"] for m in page["messages"]] == [sent["seq"]], page
        reader.cursor = page["next_cursor"]
    return dm, channel


async def _idle_cpu(pids: dict[str, list[int]], window_s: float) -> dict[str, float]:
    """Each group's CPU over the window as a percentage of one core (per process for warps)."""
    before = {name: sum(cpu_seconds(p) for p in group) for name, group in pids.items()}
    await asyncio.sleep(window_s)
    after = {name: sum(cpu_seconds(p) for p in group) for name, group in pids.items()}
    return {name: 100 * (after[name] - before[name]) / window_s / len(pids[name]) for name in pids}


def _memory_rows(pids: list[int], n: int, when: str) -> list[BenchResult]:
    measured = [memory_mb(p) for p in pids]
    rss = [m[0] for m in measured]
    pss = [m[1] for m in measured]
    return [
        BenchResult(
            f"fleet: Warp RSS, median ({when}) @ {n} agents",
            unit="MB",
            value=statistics.median(rss),
            target=TARGET_RSS,
            extra={"max": max(rss), "processes": len(pids)},
        ),
        BenchResult(
            f"fleet: Warp PSS, median ({when}) @ {n} agents",
            unit="MB",
            value=statistics.median(pss),
            extra={"max": max(pss), "why": "RSS with shared pages divided among the processes mapping them"},
        ),
    ]


FLOOR_SCRIPT = """
import sys
from shared.footprint import leave_out_unused_imports
leave_out_unused_imports(None)
import mcp.server.mcpserver, nats
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) / 1024)
"""


async def _floor_rss() -> BenchResult:
    """What any Python MCP server on NATS holds before its own code: the interpreter, the MCP
    SDK's server and nats-py, imported as Warp imports them."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLOOR_SCRIPT, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, "fleet: the floor process failed"
    return BenchResult(
        "ref: Python with the MCP SDK server and nats-py imported (RSS)",
        unit="MB",
        value=float(out.decode().strip()),
        extra={"why": "below this no Python MCP server on NATS goes; Warp's own share is the rest"},
    )


@dataclass
class ColdStart:
    ready_ms: float
    """Until every Warp of the fleet is registered and answering."""
    online_ms: float
    """Until Weft lists all of them online."""
    fabric_cpu: dict[str, float]
    """Weft's and nats-server's CPU seconds meanwhile: what the start cost the fabric's side."""


def _fabric_cpu(weft: WeftProcess, server: EmbeddedNatsServer) -> dict[str, float]:
    assert weft.proc is not None and server.pid is not None
    return {"Weft": cpu_seconds(weft.proc.pid), "nats-server": cpu_seconds(server.pid)}


async def _cold_start(fleet: Fleet, weft: WeftProcess, server: EmbeddedNatsServer, n: int) -> ColdStart:
    """Start the fleet's N Warps at once."""
    before = _fabric_cpu(weft, server)
    started = time.perf_counter()
    await fleet.start(n)
    ready_ms = (time.perf_counter() - started) * 1000
    await _online(weft, n, timeout=60 + n)
    online_ms = (time.perf_counter() - started) * 1000
    after = _fabric_cpu(weft, server)
    meanwhile = {f"{part}'s CPU meanwhile (s)": round(after[part] - before[part], 2) for part in after}
    return ColdStart(ready_ms, online_ms, meanwhile)


async def _work_records(nats_url: str) -> int:
    """Work records the load phases left (each Warp's start reads them once: scaling.md)."""
    nc = await connect(url=nats_url, name="fleet-records")
    try:
        info = await nc.jetstream().stream_info(kv_stream(ProjectNames(PROJECT).work_records_bucket))
        return int(info.state.messages)
    finally:
        await nc.close()


async def _zygote_fleet(
    ctx: BenchContext, weft: WeftProcess, server: EmbeddedNatsServer, n: int
) -> list[BenchResult]:
    """N Warps forked from one ``warp --zygote``: cold start, memory and start-up CPU."""
    records = await _work_records(server.url)
    zygote = await asyncio.to_thread(start_zygote, ctx.scratch / "fleet-zygote.log")
    assert zygote is not None, f"fleet: the zygote did not start; see {ctx.scratch / 'fleet-zygote.log'}"
    fleet = Fleet(ctx, server.url, extra_env={ZYGOTE_ENV: zygote.path})
    try:
        start = await _cold_start(fleet, weft, server, n)
        warps = sorted(zygote.children)
        assert len(warps) == n, f"fleet: {len(warps)} of {n} Warps are the zygote's children"
        start_cpu = sum(cpu_seconds(pid) for pid in [*warps, *fleet.pids])
        forked = "fleet, forked from a zygote:"
        rows = [
            BenchResult(f"{forked} cold start, all ready @ {n} agents", value=start.ready_ms),
            BenchResult(f"{forked} cold start, all online in Weft @ {n} agents", value=start.online_ms),
            BenchResult(
                f"{forked} CPU to start, per Warp @ {n} agents",
                unit="s",
                value=start_cpu / n,
                extra={
                    "why": "each Warp and its stand-in, from spawn to registered and answering",
                    "zygote's own CPU, once": cpu_seconds(zygote.proc.pid),
                    "work records in the project": records,
                    **start.fabric_cpu,
                },
            ),
        ]
        rows += [
            dataclasses.replace(row, name=row.name.replace("fleet:", forked))
            for row in _memory_rows(warps, n, "started")
        ]
        return rows
    finally:
        await fleet.stop()
        await asyncio.to_thread(zygote.stop)


async def _one_size(ctx: BenchContext, n: int) -> list[BenchResult]:
    folder = ctx.scratch / f"fleet-{n}"
    results: list[BenchResult] = []
    with EmbeddedNatsServer(ServerConfig()) as server:
        weft = WeftProcess(server.url, folder, env=WEFT_ENV)
        await weft.start()
        watcher = await connect(url=server.url, name="fleet-offline-watch")
        offline: list[str] = []

        async def count_offline(msg: Any) -> None:
            offline.append(json.loads(msg.data)["subject_id"])

        await watcher.subscribe(ProjectNames(PROJECT).event_subject("agent", "offline"), cb=count_offline)
        fleet = Fleet(ctx, server.url)
        try:
            start = await _cold_start(fleet, weft, server, n)
            results.append(BenchResult(f"fleet: cold start, all ready @ {n} agents", value=start.ready_ms))
            results.append(
                BenchResult(f"fleet: cold start, all online in Weft @ {n} agents", value=start.online_ms)
            )

            phases = {"cold start": len(offline)}
            pids = fleet.pids
            start_cpu = sum(cpu_seconds(pid) for pid in pids)
            results.append(
                BenchResult(
                    f"fleet: CPU to start, per Warp @ {n} agents",
                    unit="s",
                    value=start_cpu / n,
                    extra={"why": "from spawn to registered and answering", **start.fabric_cpu},
                )
            )
            results += _memory_rows(pids, n, "started")

            window = 2.0 if ctx.quick else 15.0
            assert weft.proc is not None and server.pid is not None
            idle = await _idle_cpu({"weft": [weft.proc.pid], "nats": [server.pid], "warp": pids}, window)
            results.append(
                BenchResult(
                    f"fleet: Weft idle CPU @ {n} agents",
                    unit="% core",
                    value=idle["weft"],
                    target=TARGET_IDLE,
                )
            )
            results.append(
                BenchResult(f"fleet: nats-server idle CPU @ {n} agents", unit="% core", value=idle["nats"])
            )
            results.append(
                BenchResult(f"fleet: one Warp's idle CPU @ {n} agents", unit="% core", value=idle["warp"])
            )

            phases["idle"] = len(offline)
            await _warm_fleet(fleet, weft, n)
            samples, wall = await _claims_raw(server.url, n, PACED)
            before = f"{PACED.raw_row}{RAW_BEFORE} @ {n} agents"
            results.append(summarize(before, samples, throughput=len(samples) / wall))
            samples, wall = await _floor_mcp(fleet, n)
            results.append(summarize(f"{FLOOR_ROW} @ {n} agents", samples, throughput=len(samples) / wall))
            for mode in CLAIM_MODES:
                samples, wall = await _claims_mcp(fleet, weft, n, mode)
                results.append(
                    summarize(
                        f"{mode.fleet_row} @ {n} agents",
                        samples,
                        baseline=f"{mode.raw_row} @ {n} agents",
                        target=TARGET_MS if mode.paced else None,
                        throughput=len(samples) / wall,
                        extra=mode.extra,
                    )
                )
                phases[mode.phase] = len(offline)
            dm, channel = await _messages(fleet, ctx.iterations(200, quick=10))
            results.append(summarize(f"fleet: DM send -> read @ {n} agents", dm, target=TARGET_MS))
            results.append(
                summarize(f"fleet: channel send -> visible @ {n} agents", channel, target=TARGET_MS)
            )
            phases["messages"] = len(offline)
            results += _memory_rows(pids, n, "after load")
            streams = await watcher.jetstream().streams_info()
            results.append(
                BenchResult(
                    f"fleet: JetStream consumers per agent, after load @ {n} agents",
                    unit="count",
                    value=sum(info.state.consumer_count for info in streams) / n,
                    extra={
                        "streams": len(streams),
                        "why": "an agent's inbox consumer is made at its first read",
                    },
                )
            )

            for mode in CLAIM_MODES:  # the baselines, after the fleet's own load
                samples, wall = await _claims_raw(server.url, n, mode)
                results.append(
                    summarize(f"{mode.raw_row} @ {n} agents", samples, throughput=len(samples) / wall)
                )
            results += own_claim_costs(results, n)
            results += await _alternating(fleet, weft, server.url, n, ctx.quick)

            await watcher.flush()
            results.append(
                BenchResult(
                    f"fleet: false offline detections @ {n} agents",
                    unit="count",
                    value=len(offline),
                    target="0",
                    extra={"after each phase": phases, "agents": len(set(offline))},
                )
            )
        finally:
            await fleet.stop()
            await watcher.close()
        try:
            results += await _zygote_fleet(ctx, weft, server, n)
        finally:
            await weft.stop()
    return results


async def run(ctx: BenchContext) -> list[BenchResult]:
    results = [await _floor_rss()]
    for n in ctx.sizes_of(SIZES, QUICK_SIZES):
        results += await _one_size(ctx, n)
    return results
