"""File leases (shared.leases, docs/leases.md): issue 15's three targets.

* **acquire without conflict** against the raw KV create it needs (one ``kv.create`` of a
  fresh key, nats-py, same server, same run): target p50 within 2x.
* **conflict check** with N live leases in the project (each on its own file, spread over
  100 directories), for N = 100, 1,000, 10,000: the in-memory check an acquire makes
  (``LeaseBook.clashes``) for a request that overlaps one of them. Target p95 <= 5 ms at
  10,000 and a per-lease cost that does not grow (``run.py`` draws the curve; the index
  makes the check's cost independent of N, so the per-lease cost falls). The refused
  acquire at 10,000 (check, catching up with the bucket, the refusal) is its own row.
* **git hook**: ``git commit`` of one file in a real repository with the loom-guard hook
  installed, against the same commit without it, interleaved, a Weft started here holding
  1,000 leases: target <= 300 ms added.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench_shuttle import TOKEN, weft_running
from benchlib import BenchContext, BenchResult, percentile, summarize
from nats.js.api import KeyValueConfig

from shared.leases.book import LeaseBook, LeaseConflict
from shared.models import LeaseMode, utcnow
from shared.names import ProjectNames
from shared.nats.client import connect
from testsupport.env import without_fabric

RAW = "raw nats-py: kv create"
HOLDER = "a" * 32
OTHER = "b" * 32


async def _acquire_vs_raw(ctx: BenchContext, n: int) -> tuple[list[float], list[float]]:
    """Interleaved, so both see the same load: one raw ``kv.create`` of a fresh key (the
    write an acquire needs), then one acquire of a free file through a LeaseBook."""
    nc = await connect(url=ctx.nats_url)
    js = nc.jetstream()
    bucket = f"raw-leases-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(KeyValueConfig(bucket=bucket))
    book = LeaseBook(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"))
    body = (b'{"holder": "' + HOLDER.encode() + b'", "patterns": ["src/x.py"], "mode": "exclusive"}') * 2
    raw: list[float] = []
    ours: list[float] = []
    try:
        await book.start()
        for i in range(n + 10):
            start = time.perf_counter()
            await kv.create(uuid.uuid4().hex, body)
            middle = time.perf_counter()
            await book.acquire(HOLDER, [f"pkg{i % 50}/file{i}.py"], ttl_s=600)
            end = time.perf_counter()
            if i >= 10:
                raw.append((middle - start) * 1000)
                ours.append((end - middle) * 1000)
        await book.settle()
        return raw, ours
    finally:
        await book.stop()
        await js.delete_key_value(bucket)
        await nc.close()


async def _fill(book: LeaseBook, count: int, start: int) -> None:
    """``count`` more leases of OTHER, one file each, over 100 directories (in parallel)."""
    sem = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with sem:
            await book.acquire(OTHER, [f"src/d{i % 100}/f{i}.py"], ttl_s=3600)

    await asyncio.gather(*(one(i) for i in range(start, start + count)))


async def _checks(ctx: BenchContext, sizes: tuple[int, ...], n: int) -> list[BenchResult]:
    nc = await connect(url=ctx.nats_url)
    book = LeaseBook(nc, ProjectNames(f"bench-{uuid.uuid4().hex[:8]}"))
    results: list[BenchResult] = []
    try:
        await book.start()
        held = 0
        for size in sizes:
            await _fill(book, size - held, held)
            held = size
            mirror = await book.start()
            await mirror.sync()
            assert len(book.leases()) == size
            wanted = [f"src/d{size % 100}/*.py"]  # overlaps the leases in one directory
            samples = []
            for i in range(n + 20):
                start = time.perf_counter()
                clashes = book.clashes(HOLDER, wanted, LeaseMode.EXCLUSIVE, utcnow())
                elapsed = (time.perf_counter() - start) * 1000
                assert clashes
                if i >= 20:
                    samples.append(elapsed)
            row = summarize(f"lease conflict check @ {size} leases", samples)
            if size == sizes[-1]:
                row.target = "p95 <= 5 ms"
            results.append(row)
        refused = []
        for i in range(n // 2 + 5):
            start = time.perf_counter()
            try:
                await book.acquire(HOLDER, [f"src/d{i % 100}/f{i}.py"])
            except LeaseConflict:
                pass
            else:
                raise AssertionError("a conflicting acquire was granted")
            if i >= 5:
                refused.append((time.perf_counter() - start) * 1000)
        results.append(summarize(f"leases: refused acquire, {sizes[-1]} live leases", refused))
        return results
    finally:
        await book.stop()
        await nc.close()


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]}: {done.stderr.strip()[:300]}")


def _hook_rows(ctx: BenchContext, n: int) -> list[BenchResult]:
    project = f"bench-guard-{uuid.uuid4().hex[:6]}"
    env = without_fabric(also=("GIT_",))
    repos = {}
    for name in ("plain", "guarded"):
        repo = ctx.scratch / f"repo-{name}-{project}"
        repo.mkdir(parents=True)
        for args in (("init", "-q"), ("config", "user.email", "b@example.com"), ("config", "user.name", "B")):
            _git(repo, *args)
        (repo / "notes.txt").write_text("0\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "start")
        repos[name] = repo
    with weft_running(ctx.nats_url) as url:

        async def hold() -> None:
            nc = await connect(url=ctx.nats_url)
            book = LeaseBook(nc, ProjectNames(project))
            try:
                await book.start()
                await _fill(book, 1000, 0)
                await book.settle()
            finally:
                await book.stop()
                await nc.close()

        asyncio.run(hold())
        shuttle = str(Path(sys.executable).with_name("shuttle"))
        hook_env = {**env, "LOOM_API_URL": url, "LOOM_API_TOKEN": TOKEN, "LOOM_PROJECT_ID": project}
        subprocess.run(
            [shuttle, "leases", "install-hook", "--repo", str(repos["guarded"])],
            env=hook_env,
            check=True,
            capture_output=True,
        )
        times: dict[str, list[float]] = {"plain": [], "guarded": []}
        for i in range(n + 2):
            for name, repo in repos.items():
                (repo / "notes.txt").write_text(f"{i + 1}\n")
                _git(repo, "add", "notes.txt", env=hook_env)
                start = time.perf_counter()
                _git(repo, "commit", "-qm", f"c{i}", env={**hook_env, "LOOM_AGENT_ID": HOLDER})
                if i >= 2:
                    times[name].append((time.perf_counter() - start) * 1000)
    plain, guarded = (
        summarize("git commit, no hook", times["plain"]),
        summarize("git commit with loom-guard (1,000 leases)", times["guarded"], target="<= 300 ms added"),
    )
    added = percentile(times["guarded"], 50) - percentile(times["plain"], 50)
    guarded.extra["added_p50_ms"] = round(added, 2)
    guarded.extra["added_p95_ms"] = round(
        percentile(times["guarded"], 95) - percentile(times["plain"], 95), 2
    )
    return [plain, guarded]


async def run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(300, 30)
    raw, ours = await _acquire_vs_raw(ctx, n)
    results = [
        summarize(RAW, raw),
        summarize("leases: acquire without conflict", ours, baseline=RAW, target="p50 <= 2x raw"),
    ]
    sizes = (100, 1000) if ctx.quick else (100, 1000, 10_000)
    results += await _checks(ctx, sizes, ctx.iterations(500, 50))
    results += await asyncio.to_thread(_hook_rows, ctx, ctx.iterations(30, 5))
    return results
