"""What tracing costs on the hot paths (docs/operations.md, Traces), measured both ways in the
same run: each path runs in a fresh process with the SDK off (``OTEL_SDK_DISABLED=true``),
with Loom's default (no ``OTEL_*`` set: only work spans recorded, kept on the traces stream,
no exporter) and exporting everything over OTLP/HTTP to a receiver started here.

* work cycle: ``WorkQueue`` submit -> claim -> progress -> complete (what Weft and Warp do
  for every item, in one process here);
* REST submit: ``POST /api/work`` to a real Weft (uvicorn, FastAPI's own server spans);
* DM send -> read: two real ``warp`` processes through MCP stdio sessions (Warp's messaging
  path, the MCP SDK's spans of each tool call).

Each mode runs in four rounds (each round starting with another mode, every run a new
process) and its samples are pooled, so the machine's drift lands on no mode alone. The
default's target: within 5% of off (p50).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

from benchlib import BenchContext, BenchResult, summarize, time_async

MODES = {
    "off": "tracing off (OTEL_SDK_DISABLED)",
    "default": "default (work spans kept, no exporter)",
    "otlp": "exporting everything (OTLP/HTTP)",
}
PATHS = {"cycle": "work cycle", "rest": "REST submit", "dm": "DM send -> read (MCP)"}
TARGET = "<= 1.05x off"
AGENT = "c0" * 16


def _row(path: str, mode: str) -> str:
    return f"tracing: {PATHS[path]}, {MODES[mode]}"


# -- in the child process ------------------------------------------------------------
async def _cycle(nats_url: str, n: int) -> list[float]:
    from shared.models import WorkSubmission
    from shared.names import ProjectNames
    from shared.nats.client import connect
    from shared.work.rules import Claimant
    from testsupport.work import work_queue

    nc = await connect(url=nats_url)
    queue = work_queue(nc, ProjectNames(f"bench-tr-{uuid.uuid4().hex[:8]}"))
    claimant = Claimant(agent_id=AGENT, agent_type="generic", capabilities=("code",))

    async def op() -> None:
        item = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"))
        got = await queue.claim(claimant)
        assert got is not None and got.id == item.id
        await queue.progress(item.id, AGENT, 50, "half")
        await queue.complete(item.id, AGENT, "done")

    try:
        return await time_async(op, n)
    finally:
        await queue.traces.close()
        await nc.close()


async def _rest(nats_url: str, n: int) -> list[float]:
    import httpx

    from shared.settings import NatsSettings
    from testsupport.serving import serve_in_loop
    from weft.app import create_app
    from weft.settings import WeftSettings
    from weft.spinup import DisabledSpinup

    project = f"bench-tr-{uuid.uuid4().hex[:8]}"
    settings = WeftSettings(nats=NatsSettings(url=nats_url), project_id=project)
    body = {"task_id": "t", "description": "d", "capability": "code"}
    async with (
        serve_in_loop(create_app(settings, spinup=DisabledSpinup())) as weft,
        httpx.AsyncClient(base_url=weft.url) as client,
    ):

        async def op() -> None:
            response = await client.post("/api/work", json=body)
            assert response.status_code == 201, response.text

        return await time_async(op, n)


async def _dm(nats_url: str, n: int, scratch: Path) -> list[float]:
    from bench_warp import call_ok, wait_ready, warp_env, warp_session

    ctx = BenchContext(nats_url=nats_url, websocket_url=None, scratch=scratch)
    project = f"bench-tr-{uuid.uuid4().hex[:8]}"
    b_id = uuid.uuid4().hex
    otel = {k: v for k, v in os.environ.items() if k.startswith("OTEL_")}
    with (scratch / "warp-tracing.stderr").open("a") as errlog:
        async with AsyncExitStack() as stack:
            a = await warp_session(
                stack, {**warp_env(ctx, project, uuid.uuid4().hex, "tr-a"), **otel}, errlog
            )
            b = await warp_session(stack, {**warp_env(ctx, project, b_id, "tr-b"), **otel}, errlog)
            await wait_ready(a)
            await wait_ready(b)

            async def op() -> None:
                await call_ok(a, "warp_messages_send_direct", {"recipient_id": b_id, "message": "bench"})
                page = await call_ok(b, "warp_messages_read_direct", {"limit": 10})
                assert len(page["messages"]) == 1, page

            return await time_async(op, n)


async def _child(nats_url: str, n: int, scratch: Path) -> dict[str, list[float]]:
    from shared.trace import tracing

    # The DM path first: its client is the agent's MCP host, not Loom, so this process runs
    # no tracing of ours while it drives the two Warps (which run in the mode's environment).
    dm = await _dm(nats_url, n, scratch)
    tracing.configure("loom-bench")  # then as Weft and Warp do at start (the mode is in the environment)
    return {"cycle": await _cycle(nats_url, n), "rest": await _rest(nats_url, n), "dm": dm}


# -- in the suite's process --------------------------------------------------------------
def _mode_env(mode: str, receiver_url: str) -> dict[str, str]:
    from testsupport.env import without_fabric  # not at the top: a child has no repository path yet

    env = without_fabric(also=("OTEL_",))
    if mode == "off":
        env["OTEL_SDK_DISABLED"] = "true"
    elif mode == "otlp":
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver_url, OTEL_BSP_SCHEDULE_DELAY="200")
    return env


async def _run_mode(ctx: BenchContext, mode: str, receiver_url: str, n: int) -> dict[str, list[float]]:
    scratch = ctx.scratch / f"tracing-{mode}-{uuid.uuid4().hex[:6]}"
    scratch.mkdir()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "child",
        ctx.nats_url,
        str(n),
        str(scratch),
        env=_mode_env(mode, receiver_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 600)
    if proc.returncode != 0:
        raise RuntimeError(f"tracing bench, mode {mode}: exit {proc.returncode}: {err.decode()[-2000:]}")
    samples: dict[str, list[float]] = json.loads(out.decode().strip().splitlines()[-1])
    return samples


async def run(ctx: BenchContext) -> list[BenchResult]:
    from testsupport.otlp import otlp_receiver

    rounds = 1 if ctx.quick else 4
    n = ctx.iterations(100, 15)  # per round
    modes = list(MODES)
    pooled: dict[str, dict[str, list[float]]] = {mode: {path: [] for path in PATHS} for mode in modes}
    started = time.perf_counter()
    async with otlp_receiver() as receiver:
        for index in range(rounds):  # each round starts with another mode: drift lands on none
            for mode in modes[index % 3 :] + modes[: index % 3]:
                for path, samples in (await _run_mode(ctx, mode, receiver.url, n)).items():
                    pooled[mode][path].extend(samples)
        exported = len(receiver.spans)
    results: list[BenchResult] = []
    for path in PATHS:
        off = _row(path, "off")
        results.append(summarize(off, pooled["off"][path]))
        results.append(summarize(_row(path, "default"), pooled["default"][path], baseline=off, target=TARGET))
        results.append(
            summarize(
                _row(path, "otlp"), pooled["otlp"][path], baseline=off, extra={"spans_received": exported}
            )
        )
    results[-1].extra["seconds"] = round(time.perf_counter() - started, 1)
    return results


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "child":
    here = Path(__file__).resolve().parent
    sys.path[:0] = [str(here), str(here.parent.parent)]
    samples = asyncio.run(_child(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])))
    print(json.dumps(samples))
