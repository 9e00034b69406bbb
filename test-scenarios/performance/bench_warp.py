"""Warp through real MCP stdio sessions vs raw nats-py doing the same NATS operations.

Two ``warp`` processes (agents A and B) in one project, driven by the SDK's
stdio client, exactly as an agent's MCP client drives them:

* channel send -> visible to the other agent: A ``warp_channels_send``, then B
  ``warp_channels_read`` with its cursor returns the message. Raw: the same
  message and headers published to the channel stream, then a second client reads
  a page from its cursor (batched direct get), as Warp does.
* DM send -> read: A ``warp_messages_send_direct`` to B, then B
  ``warp_messages_read_direct`` returns it (acknowledged). Raw: publish to the
  inbox subject, no-wait pull from B's durable consumer, confirmed ack.
* broadcast -> claim: A ``warp_work_broadcast``, then B ``warp_work_claim``
  gets it. Raw: the same work-queue operations issued in-process through
  ``shared.work.queue.WorkQueue`` (nats-py; KV record, queue publish, events, pull).
* cold start: process spawn -> ``initialize`` answered (Warp answers it before the MCP
  SDK has loaded), and -> the first ``tools/list`` answered (the SDK and the tools loaded);
  plus, for reference, what importing the MCP SDK alone costs on this machine.
* floor: a no-op tool call on A then on B (``warp_handle_get``, no NATS), the
  price of two MCP stdio round trips that every two-agent path above pays.

The same rounds run three times, with three clients: the Python SDK's (``MCP``), the
official TypeScript SDK's (``MCP, TS SDK client``: what Node-based agent hosts use; run
by ``ts-client/warp_rounds.mjs`` when ``node`` and its ``npm ci`` are there, which the
Makefile sees to) and a bare JSON-RPC loop (``raw JSON-RPC``: Warp's own cost).

The raw baselines run before and after the MCP runs; each keeps the faster of its two runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from benchlib import BenchContext, BenchResult, launch_env, summarize, time_async

WARP = str(Path(sys.executable).parent / "warp")
A_ID = "a1" * 16
B_ID = "b2" * 16
TARGET_MSG = "p50 <= 5 ms"
TARGET_OWN = "<= 3x raw"
"""Warp's own cost: a path's p50 less the floor's (two MCP stdio calls doing nothing), over the
raw nats-py work of the same path, measured with the TypeScript SDK client (the target as
restated after the floor was measured: docs/performance.md, Warp)."""
OWN_COST_PATHS = (
    ("channel send -> visible", "raw: channel publish -> page from cursor"),
    ("DM send -> read", "raw: inbox publish -> pull + ack"),
    ("broadcast -> claim", "raw: WorkQueue submit -> claim"),
)
RAW_CHANNEL = "raw: channel publish -> page from cursor"
# Two tool calls that touch no NATS at all (warp_handle_get on A, then on B): the cost of
# the MCP stdio hops alone, below which no two-agent message path can go.
FLOOR_MCP = "warp: floor, no-op call on A then B (MCP)"


def warp_env(ctx: BenchContext, project: str, agent_id: str, handle: str) -> dict[str, str]:
    home = ctx.scratch / "home"
    proj = ctx.scratch / "project"
    home.mkdir(exist_ok=True)
    proj.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "NATS_URL": ctx.nats_url,
        "LOOM_PROJECT_ID": project,
        "LOOM_PROJECT_PATH": str(proj),
        "LOOM_AGENT_ID": agent_id,
        "LOOM_HANDLE": handle,
        "LOOM_CAPABILITIES": "code,rpc,ts",
        "LOOM_AUTO_REGISTER": "1",
        "LOOM_MAX_CONCURRENT_TASKS": "1000",
        "LOOM_LOG_LEVEL": "WARNING",
        **launch_env(),
    }


async def warp_session(stack: AsyncExitStack, env: dict[str, str], errlog: Any) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=WARP, env=env, cwd=env["LOOM_PROJECT_PATH"])
    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def call_ok(session: Any, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    res = await session.call_tool(tool, args or {})
    if res.is_error:
        raise RuntimeError(f"{tool}: {res.content[0].text}")
    return dict(res.structured_content)


async def wait_ready(session: Any) -> None:
    for _ in range(200):
        res = await session.call_tool("warp_registry_get_info", {})
        if not res.is_error:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("warp did not become ready")


async def _bench_mcp(ctx: BenchContext, project: str, n: int) -> list[BenchResult]:
    results: list[BenchResult] = []
    errlog = (ctx.scratch / "warp-bench.stderr").open("w")
    async with AsyncExitStack() as stack:
        a = await warp_session(stack, warp_env(ctx, project, A_ID, "bench-a"), errlog)
        b = await warp_session(stack, warp_env(ctx, project, B_ID, "bench-b"), errlog)
        await wait_ready(a)
        await wait_ready(b)

        async def floor_round() -> None:
            await call_ok(a, "warp_handle_get")
            await call_ok(b, "warp_handle_get")

        results.append(
            summarize(
                FLOOR_MCP,
                await time_async(floor_round, n),
                baseline=RAW_CHANNEL,
                extra={"why": "a two-agent message path can never be faster than this"},
            )
        )

        cursor = {"value": (await call_ok(b, "warp_channels_read", {"channel": "roadmap"}))["next_cursor"]}

        async def channel_round() -> None:
            sent = await call_ok(a, "warp_channels_send", {"channel": "roadmap", "message": "bench"})
            page = await call_ok(b, "warp_channels_read", {"channel": "roadmap", "cursor": cursor["value"]})
            assert [m["seq"] for m in page["messages"]] == [sent["seq"]], page
            cursor["value"] = page["next_cursor"]

        samples = await time_async(channel_round, n)
        results.append(
            summarize(
                "warp: channel send -> visible (MCP)",
                samples,
                baseline=RAW_CHANNEL,
                target=TARGET_MSG,
            )
        )

        async def dm_round() -> None:
            await call_ok(a, "warp_messages_send_direct", {"recipient_id": B_ID, "message": "bench"})
            page = await call_ok(b, "warp_messages_read_direct", {"limit": 10})
            assert len(page["messages"]) == 1, page

        samples = await time_async(dm_round, n)
        results.append(
            summarize(
                "warp: DM send -> read (MCP)",
                samples,
                baseline="raw: inbox publish -> pull + ack",
                target=TARGET_MSG,
            )
        )

        claimed: list[str] = []
        missed: list[str] = []

        async def work_round() -> None:
            item = (await call_ok(a, "warp_work_broadcast", {"description": "bench", "capability": "code"}))[
                "item"
            ]
            got = await call_ok(b, "warp_work_claim")
            while not got["claimed"]:  # shared.work's no-wait pull can miss a just-queued item
                missed.append(item["id"])
                got = await call_ok(b, "warp_work_claim")
            assert got["item"]["id"] == item["id"], got
            claimed.append(item["id"])

        samples = []
        for i in range(n + 5):
            start = time.perf_counter()
            await work_round()
            elapsed = (time.perf_counter() - start) * 1000
            await call_ok(b, "warp_work_complete", {"work_id": claimed[-1]})
            if i >= 5:
                samples.append(elapsed)
        results.append(
            summarize(
                "warp: broadcast -> claim (MCP)",
                samples,
                baseline="raw: WorkQueue submit -> claim",
                target=TARGET_MSG,
                extra={"claims_retried": len(missed)},
            )
        )
    errlog.close()
    return results


class RawRpc:
    """A bare JSON-RPC client over a process's stdio (or another pair of pipes): what Warp
    itself costs, without the SDK client's per-call work (it re-validates every structured
    result with jsonschema). Several calls may be in flight at once; one reader hands each
    answer to its caller."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pid: int,
        proc: asyncio.subprocess.Process | None = None,
    ) -> None:
        self.pid, self.proc = pid, proc
        self._lines, self._out = reader, writer
        self._id = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, env: dict[str, str], errlog: Any) -> RawRpc:
        """A Warp started with ``env`` and initialized."""
        proc = await asyncio.create_subprocess_exec(
            WARP,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errlog,
            env=env,
            cwd=env["LOOM_PROJECT_PATH"],
            limit=16 * 1024 * 1024,
        )
        assert proc.stdout is not None and proc.stdin is not None
        rpc = cls(proc.stdout, proc.stdin, proc.pid, proc)
        await rpc.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        await rpc._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return rpc

    @property
    def input_pipe(self) -> int:
        """The inode of the pipe this client writes the process's input into (the process
        holds its other end: see ``testsupport.processes.holding_pipes``)."""
        return os.fstat(self._out.get_extra_info("pipe").fileno()).st_ino

    async def _read(self) -> None:
        while line := await self._lines.readline():
            reply = json.loads(line)
            waiting = self._waiting.pop(reply.get("id"), None)  # notifications carry no id
            if waiting is not None and not waiting.done():
                waiting.set_result(reply)
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(RuntimeError(f"process {self.pid} closed its output"))

    async def _send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message).encode() + b"\n")
        await self._out.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._id] = answer
        await self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        reply = await answer
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply["result"])

    async def tool(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": name, "arguments": args or {}})
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result['content'][0]['text']}")
        return dict(result["structuredContent"])

    async def close(self) -> None:
        """Close its input (the process ends on it) and wait for its output to end."""
        self._out.close()
        if self.proc is not None:
            await self.proc.wait()
        await self._reader


async def _bench_rpc(ctx: BenchContext, project: str, n: int) -> list[BenchResult]:
    errlog = (ctx.scratch / "warp-rpc.stderr").open("w")
    a = await RawRpc.start(warp_env(ctx, project, "a3" * 16, "rpc-a"), errlog)
    b_id = "b4" * 16
    b = await RawRpc.start(warp_env(ctx, project, b_id, "rpc-b"), errlog)
    results: list[BenchResult] = []
    try:
        for rpc in (a, b):
            for _ in range(200):
                res = await rpc.request("tools/call", {"name": "warp_registry_get_info", "arguments": {}})
                if not res.get("isError"):
                    break
                await asyncio.sleep(0.05)

        async def floor_round() -> None:
            await a.tool("warp_handle_get")
            await b.tool("warp_handle_get")

        results.append(
            summarize(
                "warp: floor, no-op call on A then B (raw JSON-RPC)",
                await time_async(floor_round, n),
                baseline=RAW_CHANNEL,
            )
        )
        cursor = {"value": (await b.tool("warp_channels_read", {"channel": "errors"}))["next_cursor"]}

        async def channel_round() -> None:
            sent = await a.tool("warp_channels_send", {"channel": "errors", "message": "bench"})
            page = await b.tool("warp_channels_read", {"channel": "errors", "cursor": cursor["value"]})
            assert [m["seq"] for m in page["messages"]] == [sent["seq"]], page
            cursor["value"] = page["next_cursor"]

        async def dm_round() -> None:
            await a.tool("warp_messages_send_direct", {"recipient_id": b_id, "message": "bench"})
            page = await b.tool("warp_messages_read_direct", {"limit": 10})
            assert len(page["messages"]) == 1, page

        retried: list[str] = []

        rows = [
            (
                "warp: channel send -> visible (raw JSON-RPC)",
                channel_round,
                RAW_CHANNEL,
            ),
            ("warp: DM send -> read (raw JSON-RPC)", dm_round, "raw: inbox publish -> pull + ack"),
        ]
        for name, op, baseline in rows:
            samples = await time_async(op, n)
            results.append(summarize(name, samples, baseline=baseline, target=TARGET_MSG))
        samples = []
        for i in range(n + 5):
            start = time.perf_counter()
            item = (await a.tool("warp_work_broadcast", {"description": "bench", "capability": "rpc"}))[
                "item"
            ]
            got = await b.tool("warp_work_claim", {"capability": "rpc"})
            while not got["claimed"]:
                retried.append(item["id"])
                got = await b.tool("warp_work_claim", {"capability": "rpc"})
            elapsed = (time.perf_counter() - start) * 1000
            await b.tool("warp_work_complete", {"work_id": got["item"]["id"]})
            if i >= 5:
                samples.append(elapsed)
        results.append(
            summarize(
                "warp: broadcast -> claim (raw JSON-RPC)",
                samples,
                baseline="raw: WorkQueue submit -> claim",
                target=TARGET_MSG,
                extra={"claims_retried": len(retried)},
            )
        )
    finally:
        await a.close()
        await b.close()
        errlog.close()
    return results


async def _bench_raw(ctx: BenchContext, project: str, n: int) -> list[BenchResult]:
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

    from shared.models import ChannelMessage, WorkSubmission
    from shared.names import ProjectNames
    from shared.nats.client import connect
    from shared.nats.jsapi import direct_get_batch
    from shared.work.rules import Claimant
    from testsupport.work import work_queue
    from warp.channels import HDR_SCOPE, HDR_SENDER, HDR_USER

    names = ProjectNames(project)
    nc_a = await connect(url=ctx.nats_url, name="raw-a")
    nc_b = await connect(url=ctx.nats_url, name="raw-b")
    js_a, js_b = nc_a.jetstream(), nc_b.jetstream()
    results: list[BenchResult] = []
    try:
        stream = f"{names.channel_stream('raw')}"
        subject = names.channel_subject("raw")
        await js_a.add_stream(
            StreamConfig(name=stream, subjects=[subject], storage=StorageType.FILE, allow_direct=True)
        )

        # What a reader does: it knows its cursor, not the new message's sequence, so it
        # asks for a page from the cursor (a batched direct get ending with EOB).
        body = ChannelMessage(channel="raw", sender_id=A_ID, sender_handle="raw-a", body="bench")
        payload = body.to_json_bytes()
        headers = {HDR_SCOPE: "team", HDR_SENDER: A_ID, HDR_USER: "bench"}
        cursor = {"seq": int((await js_a.stream_info(stream)).state.last_seq) + 1}

        async def channel_round() -> None:
            ack = await js_a.publish(subject, payload, stream=stream, headers=headers)
            page = await direct_get_batch(nc_b, stream, start_seq=cursor["seq"], batch=20)
            assert [m.seq for m in page] == [ack.seq]
            cursor["seq"] = ack.seq + 1

        samples = await time_async(channel_round, n)
        results.append(summarize(RAW_CHANNEL, samples))

        inbox_stream = f"{names.inbox_stream}-RAW"
        inbox_subject = f"{names.inbox_subject(B_ID)}.raw".replace(".inbox.", ".rawinbox.")
        await js_a.add_stream(
            StreamConfig(
                name=inbox_stream,
                subjects=[inbox_subject],
                retention=RetentionPolicy.WORK_QUEUE,
                storage=StorageType.FILE,
                allow_direct=True,
            )
        )
        await js_b.add_consumer(
            inbox_stream,
            ConsumerConfig(durable_name="raw-b", filter_subject=inbox_subject, ack_policy=AckPolicy.EXPLICIT),
        )
        request = json.dumps({"batch": 10, "no_wait": True}).encode()

        async def pull(body: bytes, batch: int) -> list[Any]:
            inbox = nc_b.new_inbox()
            sub = await nc_b.subscribe(inbox)
            await nc_b.publish(f"$JS.API.CONSUMER.MSG.NEXT.{inbox_stream}.raw-b", body, reply=inbox)
            got = []
            while len(got) < batch:
                msg = await sub.next_msg(timeout=5)
                if msg.headers and msg.headers.get("Status"):
                    break
                got.append(msg)
            await sub.unsubscribe()
            return got

        async def dm_round() -> None:
            await js_a.publish(inbox_subject, b'{"body":"bench"}', stream=inbox_stream)
            got = await pull(request, 10)
            if not got:  # the same catch-up as Warp: the consumer had not seen the message yet
                await js_b.stream_info(inbox_stream, subjects_filter=inbox_subject)
                got = await pull(json.dumps({"batch": 1, "expires": 100_000_000}).encode(), 1)
            await asyncio.gather(*(nc_b.request(m.reply, b"+ACK", timeout=5) for m in got))
            assert len(got) == 1, [(m.data, m.headers) for m in got]

        samples = await time_async(dm_round, n)
        results.append(summarize("raw: inbox publish -> pull + ack", samples))

        raw_names = ProjectNames(f"{project}-raw")
        qa, qb = work_queue(nc_a, raw_names), work_queue(nc_b, raw_names)
        claimant = Claimant(agent_id=B_ID, agent_type="generic", capabilities=("code",))
        samples = []
        raw_missed = 0
        for i in range(n + 5):
            start = time.perf_counter()
            item = await qa.submit(WorkSubmission(task_id="t", description="bench", capability="code"))
            got = await qb.claim(claimant)
            while got is None:  # shared.work's no-wait pull can miss a just-queued item
                raw_missed += 1
                got = await qb.claim(claimant)
            elapsed = (time.perf_counter() - start) * 1000
            assert got.id == item.id
            await qb.complete(item.id, B_ID)
            if i >= 5:
                samples.append(elapsed)
        results.append(
            summarize("raw: WorkQueue submit -> claim", samples, extra={"claims_retried": raw_missed})
        )
    finally:
        await nc_a.close()
        await nc_b.close()
    return results


async def _bench_cold_start(ctx: BenchContext, project: str, n: int) -> list[BenchResult]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = warp_env(ctx, project, "c3" * 16, "bench-cold")
    errlog = (ctx.scratch / "warp-cold.stderr").open("w")
    samples: list[float] = []
    listed: list[float] = []
    for _ in range(n):
        params = StdioServerParameters(command=WARP, env=env, cwd=env["LOOM_PROJECT_PATH"])
        start = time.perf_counter()
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            samples.append((time.perf_counter() - start) * 1000)
            await session.list_tools()  # answered once the SDK and the tools have loaded
            listed.append((time.perf_counter() - start) * 1000)
    errlog.close()
    floor: list[float] = []
    for _ in range(max(3, n // 2)):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import mcp.server.mcpserver")
        assert await proc.wait() == 0
        floor.append((time.perf_counter() - start) * 1000)
    return [
        summarize("warp: cold start (spawn -> initialize)", samples, target="p50 <= 300 ms"),
        summarize("warp: cold start (spawn -> tools/list)", listed),
        summarize("ref: python -c 'import mcp.server.mcpserver'", floor),
    ]


TS_CLIENT = Path(__file__).resolve().parent / "ts-client"


def ts_client_missing() -> str | None:
    """Why the TypeScript SDK client cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        return f"its packages are not installed (npm ci --prefix {TS_CLIENT})"
    return None


async def _bench_ts(ctx: BenchContext, project: str, n: int) -> list[BenchResult]:
    missing = ts_client_missing()
    if missing is not None:
        print(f"# bench_warp: TypeScript SDK client rows not measured: {missing}", file=sys.stderr)
        return []
    b_id = "b6" * 16
    spec = {
        "command": WARP,
        "a": {"env": (env_a := warp_env(ctx, project, "a5" * 16, "ts-a")), "cwd": env_a["LOOM_PROJECT_PATH"]},
        "b": {"env": (env_b := warp_env(ctx, project, b_id, "ts-b")), "cwd": env_b["LOOM_PROJECT_PATH"]},
        "b_id": b_id,
        "n": n,
        "warmup": 5,
        "stderr": str(ctx.scratch / "warp-ts.stderr"),
    }
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(TS_CLIENT / "warp_rounds.mjs"),
        json.dumps(spec),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=TS_CLIENT,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"warp_rounds.mjs exited {proc.returncode}: {err.decode()[-2000:]}")
    got = json.loads(out)
    suffix = "(MCP, TS SDK client)"
    return [
        summarize(f"warp: floor, no-op call on A then B {suffix}", got["floor"], baseline=RAW_CHANNEL),
        summarize(
            f"warp: channel send -> visible {suffix}", got["channel"], baseline=RAW_CHANNEL, target=TARGET_MSG
        ),
        summarize(
            f"warp: DM send -> read {suffix}",
            got["dm"],
            baseline="raw: inbox publish -> pull + ack",
            target=TARGET_MSG,
        ),
        summarize(
            f"warp: broadcast -> claim {suffix}",
            got["work"],
            baseline="raw: WorkQueue submit -> claim",
            target=TARGET_MSG,
            extra={"claims_retried": got["claims_retried"]},
        ),
    ]


def _faster_runs(before: list[BenchResult], after: list[BenchResult]) -> list[BenchResult]:
    """Per baseline, the run with the lower p50: a slow moment on this shared VM must not
    make a baseline slower and so flatter the ratios measured against it."""
    later = {r.name: r for r in after}
    chosen: list[BenchResult] = []
    for first in before:
        second = later[first.name]
        best = first if (first.p50 or 0) <= (second.p50 or 0) else second
        best.extra = {**best.extra, "p50_of_both_runs": [first.p50, second.p50]}
        chosen.append(best)
    return chosen


async def run(ctx: BenchContext) -> list[BenchResult]:
    project = f"bench-warp-{uuid.uuid4().hex[:8]}"
    n = ctx.iterations(300, quick=20)
    raw_before = await _bench_raw(ctx, project, n)
    measured = await _bench_mcp(ctx, project, n)
    measured += await _bench_ts(ctx, project, n)
    measured += await _bench_rpc(ctx, project, n)
    raw_after = await _bench_raw(ctx, project, n)
    results = _faster_runs(raw_before, raw_after) + measured
    results += own_costs(results)
    results += await _bench_cold_start(ctx, project, ctx.iterations(15, quick=3))
    return results


def own_costs(results: list[BenchResult]) -> list[BenchResult]:
    """Per message path, Warp's own cost above the MCP stdio floor as a multiple of the raw
    NATS work (TypeScript SDK client rows; none when that client could not run)."""
    by_name = {r.name: r for r in results}
    suffix = "(MCP, TS SDK client)"
    floor = by_name.get(f"warp: floor, no-op call on A then B {suffix}")
    derived = (
        own_cost(
            f"warp: own cost above the floor, {path} {suffix}",
            by_name.get(f"warp: {path} {suffix}"),
            floor,
            by_name.get(raw_name),
        )
        for path, raw_name in OWN_COST_PATHS
    )
    return [row for row in derived if row is not None]


def own_cost(
    name: str, measured: BenchResult | None, floor: BenchResult | None, raw: BenchResult | None
) -> BenchResult | None:
    """``measured``'s p50 less ``floor``'s, as a multiple of ``raw``'s: Warp's own cost, the
    measure the project holds it to (None when a row is missing)."""
    if floor is None or measured is None or raw is None or not raw.p50:
        return None
    assert floor.p50 is not None and measured.p50 is not None
    return BenchResult(
        name=name,
        unit="x raw",
        value=(measured.p50 - floor.p50) / raw.p50,
        target=TARGET_OWN,
        extra={"path_p50": measured.p50, "floor_p50": floor.p50, "raw_p50": raw.p50},
    )
