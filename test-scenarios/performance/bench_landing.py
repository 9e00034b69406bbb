"""Landing (warp/lander.py, shared/git/landing.py, docs/landing.md): issue 31's targets,
against raw git in the same run.

* **throughput**: 50 approved, non-conflicting items (10 with ``--quick``) with a trivial
  gate (``true``), landed by a lander (claims through the work queue on this run's NATS,
  the landing lock, batches of 4, the records) against a raw loop of ``git merge`` /
  gate / ``git push`` per item in a clone, doing the same landing: items per second and
  the wall time of each; target: Loom within 1.5x of the raw loop.
* **bisection**: one bad item among N (N = 2, 4, 8, 16; up to 8 with ``--quick``), landed
  in one batch of N: the gate runs it took against the bound ``2·log2(N) + 1``, and the
  wall time per size (a curve).
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import sys
import time
from pathlib import Path

from benchlib import BenchContext, BenchResult

from shared.git.landing import Candidate, HostLanding, Settled
from shared.git.repository import Repository, RepositorySettings, RepositoryStore
from shared.identity import Identity
from shared.models import WorkStatus, Workstream, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.work.rules import Claimant
from testsupport.git import make_origin, run_git
from testsupport.work import work_queue
from warp.lander import Lander
from warp.runtime import WarpRuntime
from warp.settings import WarpSettings

WORKER = "a" * 32
LANDER = "d" * 32
RAW = "raw git: merge+gate+push each"


def _branches(origin: Path, scratch: Path, names: list[str], bad: str | None = None) -> dict[str, str]:
    """A worker's branch per name, each adding its own file, pushed in one go: name -> head."""
    worker = scratch / f"worker-{time.monotonic_ns()}"
    run_git("clone", "--quiet", str(origin), str(worker))
    heads = {}
    for name in names:
        run_git("checkout", "--quiet", "-B", f"loom/{name}", "origin/main", cwd=worker)
        (worker / f"{name}.txt").write_text(f"{name}\n")
        if name == bad:
            (worker / "bad.txt").write_text("x\n")
        run_git("add", "--all", cwd=worker)
        run_git("commit", "--quiet", "-m", f"work on {name}", cwd=worker)
        heads[name] = run_git("rev-parse", "HEAD", cwd=worker)
    run_git("push", "--quiet", "origin", *(f"loom/{n}" for n in names), cwd=worker)
    shutil.rmtree(worker, ignore_errors=True)
    return heads


def _raw_loop(origin: Path, scratch: Path, names: list[str]) -> float:
    """Seconds for the raw loop: in a clone, per item: fetch it, merge it, run the gate, push."""
    clone = scratch / f"raw-{time.monotonic_ns()}"
    run_git("clone", "--quiet", str(origin), str(clone))
    start = time.perf_counter()
    for name in names:
        run_git("fetch", "--quiet", "origin", f"loom/{name}", cwd=clone)
        run_git("merge", "--quiet", "--no-ff", "--no-edit", "FETCH_HEAD", cwd=clone)
        os.spawnvp(os.P_WAIT, "true", ["true"])  # the gate
        run_git("push", "--quiet", "origin", "main", cwd=clone)
    elapsed = time.perf_counter() - start
    shutil.rmtree(clone, ignore_errors=True)
    return elapsed


async def _loom(ctx: BenchContext, origin: Path, names: list[str]) -> float:
    """Seconds for a lander to land ``names``, queued for landing through the work queue."""
    project = f"bench-land-{time.monotonic_ns() % 10**9}"
    names_ = ProjectNames(project)
    nc = await connect(url=ctx.nats_url)
    folder = ctx.scratch / project
    folder.mkdir()
    try:
        await RepositoryStore(nc.jetstream(), names_).put(
            RepositorySettings(url=str(origin), gate=["true"]), by="bench"
        )
        q = work_queue(nc, names_)
        heads = _branches(origin, ctx.scratch, names)
        base = run_git("rev-parse", "main", cwd=origin)
        worker = Claimant(agent_id=WORKER, agent_type="generic", capabilities=("code",))
        for name in names:
            item = await q.submit(WorkSubmission(task_id=name, description=f"do {name}", capability="code"))
            claimed = await q.claim(worker)
            assert claimed is not None and claimed.id == item.id
            ws = Workstream(
                branch=f"loom/{name}", base_ref="main", base_sha=base, head_sha=heads[name], commits=1
            )
            await q.record_workstream(item.id, WORKER, ws, step="handed-in")
            await q.complete(item.id, WORKER)
        identity = Identity(
            project_id=project,
            project_path=folder,
            agent_id=LANDER,
            base_agent_id=LANDER,
            hostname=socket.gethostname(),
            handle="bench-lander",
            agent_type="lander",
            user_id="1" * 16,
        )
        settings = WarpSettings(capabilities=("land",), auto_register=True, checkpoint_s=0)
        rt = WarpRuntime(identity, settings, nats_url=ctx.nats_url)
        rt.start()
        try:
            lander = Lander(await rt.services(), folder, poll_s=0.05)
            start = time.perf_counter()
            landed = 0
            while landed < len(names):
                landed += await lander.run_once()
            elapsed = time.perf_counter() - start
        finally:
            await rt.stop("bench over")
        page = await q.list_items(limit=1000)
        done = sum(1 for i in page.items if i.status is WorkStatus.COMPLETED)
        assert done == len(names), f"{done} of {len(names)} landed"
        return elapsed
    finally:
        await nc.close()
        shutil.rmtree(folder, ignore_errors=True)


class _Count:
    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}

    async def before_push(self, sha: str, items: list[Candidate]) -> None:
        return None

    async def settled(self, outcome: Settled) -> None:
        self.outcomes[outcome.candidate.work_id] = outcome.outcome

    async def alive(self) -> None:
        return None

    def took(self, step: str, items: list[Candidate], start_ns: int, **attributes: str | int | bool) -> None:
        return None


async def _bisect(ctx: BenchContext, n: int) -> tuple[float, int]:
    """Wall ms and gate runs to land a batch of ``n`` with one bad item in its second half."""
    origin = make_origin(ctx.scratch, {"README.md": "x\n"}, name=f"bisect-{n}-{time.monotonic_ns()}.git")
    names = [f"b{n}x{i}" for i in range(n)]
    bad = names[min(n - 1, n // 2 + 1)]
    heads = _branches(origin, ctx.scratch, names, bad=bad)
    gate = [sys.executable, "-c", "import os,sys; sys.exit(1 if os.path.exists('bad.txt') else 0)"]
    repo = Repository(url=str(origin), gate=gate)
    host = HostLanding(ctx.scratch / f"bisect-lander-{n}", repo, author=("bench", "bench@loom.invalid"))
    batch = [Candidate(f"{i:032x}", name, f"loom/{name}", heads[name]) for i, name in enumerate(names)]
    count = _Count()
    start = time.perf_counter()
    await host.land(batch, count)
    elapsed = (time.perf_counter() - start) * 1000
    assert list(count.outcomes.values()).count("gate-failed") == 1
    return elapsed, host.stats.gate_runs


async def run(ctx: BenchContext) -> list[BenchResult]:
    count = 10 if ctx.quick else 50
    origin = make_origin(ctx.scratch, {"README.md": "hello\n"}, name="landing-raw.git")
    raw_s = _raw_loop(
        origin, ctx.scratch, list(_branches(origin, ctx.scratch, [f"r{i}" for i in range(count)]))
    )
    loom_origin = make_origin(ctx.scratch, {"README.md": "hello\n"}, name="landing-loom.git")
    loom_s = await _loom(ctx, loom_origin, [f"l{i}" for i in range(count)])
    results = [
        BenchResult(name=f"{RAW}, {count} items", unit="s", value=raw_s, throughput=count / raw_s),
        BenchResult(
            name=f"landing: {count} items, gate `true`, batch 4",
            unit="s",
            value=loom_s,
            throughput=count / loom_s,
            baseline=f"{RAW}, {count} items",
            ratio=loom_s / raw_s,
            target="within 1.5x of the raw loop",
        ),
    ]
    for n in (2, 4, 8) if ctx.quick else (2, 4, 8, 16):
        wall, runs = await _bisect(ctx, n)
        bound = 2 * math.log2(n) + 1
        results.append(
            BenchResult(
                name=f"landing: bisect 1 bad @ {n} items",
                samples=1,
                p50=wall,
                extra={"gate_runs": runs, "bound": bound},
            )
        )
        results.append(
            BenchResult(
                name=f"landing: gate runs, 1 bad among {n}",
                unit="runs",
                samples=1,
                value=float(runs),
                target=f"<= 2*log2(N)+1 = {bound:g}",
            )
        )
    return results
