"""The agent hosts' plugin (docs/hosts.md): what its hooks and launcher cost an agent, per
call, against a raw nats-py process doing the least the same work needs.

* **pre-edit**: every edit or write tool call of a session runs ``loom-hook pre-edit``
  (a process: Python, the NATS connection, the project's lease book, the decision). The
  raw baseline is a Python process that connects with nats-py and reads one key of the
  leases bucket. Rows for an edit that passes and one that is refused (100 live leases
  of another agent in the project).
* **session-start**: once per session: the brief (the work records, the inbox count).
* **the launcher**: ``loom-launch warp --version`` against ``warp --version``: what finding
  Loom costs a server's start.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

from benchlib import BenchContext, BenchResult, summarize

from shared.leases.book import LeaseBook
from shared.names import ProjectNames
from shared.nats.client import connect
from testsupport.env import without_fabric

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "plugins" / "loom" / "bin" / "loom-launch"
BIN = Path(sys.executable).parent
RAW = "raw nats-py: a process connecting and reading one key"
RAW_SCRIPT = """
import asyncio, sys
import nats

async def main():
    nc = await nats.connect(sys.argv[1])
    kv = await nc.jetstream().key_value(sys.argv[2])
    try:
        await kv.get("none")
    except Exception:
        pass
    await nc.close()

asyncio.run(main())
"""


async def _timed(argv: list[str], env: dict[str, str], stdin: bytes = b"", cwd: Path | None = None) -> float:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    await proc.communicate(stdin)
    return (time.perf_counter() - start) * 1000


async def run(ctx: BenchContext) -> list[BenchResult]:
    runs = ctx.iterations(20, 3)
    project = f"bench-hosts-{uuid.uuid4().hex[:8]}"
    names = ProjectNames(project)
    session = ctx.scratch / "hosts-session"
    (session / "src").mkdir(parents=True, exist_ok=True)
    env = without_fabric()
    env.update(NATS_URL=ctx.nats_url, LOOM_PROJECT_ID=project, LOOM_BIN=str(BIN), HOME=str(ctx.scratch))
    nc = await connect(url=ctx.nats_url)
    book = LeaseBook(nc, names)
    other = "b" * 32
    for n in range(100):
        await book.acquire(other, [f"src/held/{n}/**"], handle="other")
    await book.acquire(other, ["src/taken.py"], handle="other")
    await book.stop()
    await nc.close()

    def edit(path: str) -> bytes:
        payload = {"hook_event_name": "PreToolUse", "cwd": str(session), "tool_name": "Edit"}
        payload["tool_input"] = {"file_path": str(session / path)}  # type: ignore[assignment]
        return json.dumps(payload).encode()

    hook = [str(LAUNCH), "loom-hook"]
    raw, passed, refused, briefed, launched, direct = [], [], [], [], [], []
    for n in range(runs + 1):
        samples = [
            await _timed([sys.executable, "-c", RAW_SCRIPT, ctx.nats_url, names.leases_bucket], env),
            await _timed([*hook, "pre-edit"], env, edit("src/free.py")),
            await _timed([*hook, "pre-edit"], env, edit("src/taken.py")),
            await _timed([*hook, "session-start"], env, json.dumps({"cwd": str(session)}).encode(), session),
            await _timed([str(LAUNCH), "warp", "--version"], env),
            await _timed([str(BIN / "warp"), "--version"], env),
        ]
        if n:  # the first round warms the page cache
            for bucket, took in zip((raw, passed, refused, briefed, launched, direct), samples, strict=True):
                bucket.append(took)
    return [
        summarize(RAW, raw),
        summarize("hosts: pre-edit hook, the edit passes", passed, baseline=RAW),
        summarize("hosts: pre-edit hook, the edit refused (101 leases)", refused, baseline=RAW),
        summarize("hosts: session-start hook (brief, inbox)", briefed, baseline=RAW),
        summarize("raw: warp --version", direct),
        summarize("hosts: loom-launch warp --version", launched, baseline="raw: warp --version"),
    ]
