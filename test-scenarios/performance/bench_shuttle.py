"""Shuttle start-up: wall time of ``shuttle --help``, ``shuttle fleet --json``,
``shuttle submit`` and ``shuttle work list`` (a table of 50 items, each description cut
to fit) as fresh processes against a Weft started here, plus what Python spends
importing (``-X importtime``).

Baselines in the same run: a bare interpreter (``python -c pass``) for
``--help``, and a raw httpx script doing the same HTTP calls for ``fleet`` and
``submit`` — the difference is what Shuttle itself costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from benchlib import BenchContext, BenchResult, summarize

from testsupport.env import ZYGOTES, without_fabric

TARGET = "<= 400 ms"
HELP_TARGET = "p50 <= 100 ms"  # issue 38: help is the first thing a user runs
TOKEN = "bench-token"
SHUTTLE = str(Path(sys.executable).with_name("shuttle"))

RAW_FLEET = """
import httpx, json, sys
h = {"Authorization": "Bearer %(token)s", "X-Loom-Project": "%(project)s"}
with httpx.Client(base_url="%(url)s", headers=h) as c:
    doc = {"stats": c.get("/api/stats").json(),
           "agents": c.get("/api/agents", params={"limit": 1000}).json()["items"],
           "targets": c.get("/api/targets", params={"limit": 1000}).json()["items"],
           "work": c.get("/api/work", params={"limit": 10}).json()["items"]}
sys.stdout.write(json.dumps(doc))
"""

RAW_WORK_LIST = """
import httpx, sys
h = {"Authorization": "Bearer %(token)s", "X-Loom-Project": "%(project)s"}
items = httpx.get("%(url)s/api/work", headers=h, params={"limit": 50}).json()["items"]
sys.stdout.write("\\n".join(i["id"] + " " + i["description"] for i in items) + "\\n")
"""
LISTED = 50
DESCRIPTION = "Fix the flaky login test that fails on CI about once a week; " * 3

RAW_SUBMIT = """
import httpx, sys
h = {"Authorization": "Bearer %(token)s", "X-Loom-Project": "%(project)s"}
r = httpx.post("%(url)s/api/work", headers=h,
               json={"task_id": "raw", "description": "bench", "capability": "bench"})
sys.stdout.write(r.json()["id"] + "\\n")
"""


@contextlib.contextmanager
def weft_running(nats_url: str) -> Iterator[str]:
    """A real Weft (uvicorn in its own thread and loop) on the suite's nats-server."""
    from shared.settings import NatsSettings
    from testsupport.serving import serve_in_thread
    from weft.app import create_app
    from weft.settings import WeftSettings

    settings = WeftSettings(nats=NatsSettings(url=nats_url), project_id="bench-shuttle", api_tokens=[TOKEN])
    with serve_in_thread(create_app(settings)) as served:
        yield served.url


def _env(url: str, project: str) -> dict[str, str]:
    env = without_fabric()
    env.update(LOOM_API_URL=url, LOOM_API_TOKEN=TOKEN, LOOM_PROJECT_ID=project, NO_COLOR="1")
    return env


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[1:]} exited {proc.returncode}: {proc.stderr.strip()}")
    return elapsed


def _interleaved(
    cases: dict[str, list[str]], env: dict[str, str], n: int
) -> dict[str, tuple[float, list[float]]]:
    """Each case's first run (the coldest we can get), then ``n`` rounds that run every case
    once in turn, so a baseline and the command it is compared with share the machine's load."""
    first = {name: _timed(argv, env) for name, argv in cases.items()}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(n):
        for name, argv in cases.items():
            samples[name].append(_timed(argv, env))
    return {name: (first[name], samples[name]) for name in cases}


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_profile(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    """Total import time of a command and its heaviest top-level imports (ms), in a process of
    its own (one forked from a zygote imports only what its stand-in needs)."""
    own = {k: v for k, v in env.items() if k != ZYGOTES["shuttle"]}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], env=own, capture_output=True, text=True, timeout=60
    )
    top: list[tuple[str, float]] = []
    for line in proc.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match and len(match.group(3)) == 1:  # one space of indent: a top-level import
            top.append((match.group(4), int(match.group(2)) / 1000))
    total = sum(ms for _, ms in top)
    heaviest = sorted(top, key=lambda t: t[1], reverse=True)[:6]
    return {"total_ms": round(total, 1), "heaviest_ms": {k: round(v, 1) for k, v in heaviest}}


async def run(ctx: BenchContext) -> list[BenchResult]:
    return await asyncio.to_thread(_run, ctx)


def _fill(url: str, project: str) -> None:
    """A page of work for ``work list`` to draw: long descriptions, cut to fit the table."""
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}", "X-Loom-Project": project}
    with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
        for n in range(LISTED):
            body = {"task_id": f"list-{n}", "description": f"{n}: {DESCRIPTION}", "capability": "listed"}
            client.post("/api/work", json=body).raise_for_status()


def _run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(15, quick=3)
    project = f"bench-{uuid.uuid4().hex[:8]}"
    results: list[BenchResult] = []
    with weft_running(ctx.nats_url) as url:
        env = _env(url, project)
        _fill(url, project)
        fill = {"token": TOKEN, "project": project, "url": url}
        baselines = {
            "shuttle baseline: python -c pass": [sys.executable, "-c", "pass"],
            "shuttle baseline: raw httpx fleet calls": [sys.executable, "-c", RAW_FLEET % fill],
            "shuttle baseline: raw httpx submit": [sys.executable, "-c", RAW_SUBMIT % fill],
            "shuttle baseline: raw httpx work page": [sys.executable, "-c", RAW_WORK_LIST % fill],
        }
        commands = {
            "shuttle --help": ([SHUTTLE, "--help"], "shuttle baseline: python -c pass"),
            "shuttle fleet --json": ([SHUTTLE, "fleet", "--json"], "shuttle baseline: raw httpx fleet calls"),
            "shuttle submit": (
                [SHUTTLE, "submit", "bench", "-c", "bench", "-q"],
                "shuttle baseline: raw httpx submit",
            ),
            "shuttle work list (table, 50 items)": (
                [SHUTTLE, "work", "list", "-c", "listed"],
                "shuttle baseline: raw httpx work page",
            ),
        }
        timings = _interleaved({**baselines, **{k: argv for k, (argv, _) in commands.items()}}, env, n)
        for name in baselines:
            first, samples = timings[name]
            results.append(summarize(name, samples, value=first))
        for name, (argv, baseline) in commands.items():
            first, samples = timings[name]
            target = HELP_TARGET if name == "shuttle --help" else TARGET
            result = summarize(name, samples, value=first, target=target, baseline=baseline)
            result.extra["first_run_ms"] = round(first, 1)
            result.extra["imports"] = import_profile(argv, env)
            results.append(result)
        profile = import_profile([SHUTTLE, "config", "path"], env)
        results.append(
            BenchResult(
                name="shuttle import time (config path)",
                value=float(profile["total_ms"]),  # type: ignore[arg-type]
                extra={"imports": profile},
            )
        )
    return results
