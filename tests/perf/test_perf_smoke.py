"""``make test`` proves the performance suite works: quick runs of every module (the soak for
10 seconds) must finish, print the table and the scale curves, and write results.json.

The modules run in four groups, each a run of its own in an xdist group of its own, so the
suite's workers share them (one run of all took about 8 minutes on a loaded two-core machine,
as long as the rest of a worker's files). Figures are not judged here (a shared test machine
is no place for timing thresholds); ``make bench`` on a quiet machine produces the ones in
docs/performance.md.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testsupport.env import without_fabric
from testsupport.processes import kill_tree
from testsupport.zygote import zygote_env

PERF = Path(__file__).resolve().parents[2] / "test-scenarios" / "performance"

GROUPS = {
    "tracing": ("bench_tracing", "bench_context", "bench_leases", "bench_forge", "bench_core"),
    "spinup": ("bench_spinup", "bench_a2a", "bench_landing", "bench_notify", "bench_usage", "bench_fleet"),
    "agents": (
        "bench_warp",
        "bench_shuttle",
        "bench_pattern",
        "bench_questions",
        "bench_auth",
        "bench_operator",
        "bench_interop",
    ),
    "fabric": (
        "bench_console",
        "bench_hosts",
        "bench_weft",
        "bench_workstreams",
        "bench_soak",
        "bench_client",
        "bench_graph",
        "bench_scale",
        "bench_nats_sync",
    ),
}
"""Balanced by what each module took in a loaded ``make test`` (about two minutes a group)."""


def test_every_module_is_in_exactly_one_group() -> None:
    grouped = [m for modules in GROUPS.values() for m in modules]
    assert sorted(grouped) == sorted(p.stem for p in PERF.glob("bench_*.py"))


def quick_run(tmp_path: Path, modules: tuple[str, ...]) -> tuple[dict[str, Any], str, str]:
    out = tmp_path / "results.json"
    env = without_fabric()
    # The worker's zygotes (testsupport.zygote) fork every Warp and Pattern: no figure is judged.
    run = [sys.executable, str(PERF / "run.py")]
    command = [*run, "--quick", "--forked", "--soak", "10s", "--only", *modules]
    proc = subprocess.Popen(
        [*command, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)  # its nats-server runs in a session of its own
        stdout, stderr = proc.communicate()
        pytest.fail(f"the quick run of {', '.join(modules)} took over 420 s:\n{stderr[-6000:]}")
    failed = f"exit {proc.returncode}\n{stdout[-3000:]}\n{stderr[-5000:]}"
    assert out.exists(), failed
    data = json.loads(out.read_text())
    tracebacks = "\n".join(f"--- {name} ---\n{text}" for name, text in data["failure_details"].items())
    assert data["failures"] == [] and proc.returncode == 0, f"{tracebacks}\n{failed}"
    return data, stdout, failed


# Generous: a group takes about two minutes beside the suite's other workers on a shared
# machine (no figure is judged).
@pytest.mark.timeout(480)
@pytest.mark.parametrize(
    "group", [pytest.param(name, marks=pytest.mark.xdist_group(f"perf-{name}")) for name in GROUPS]
)
def test_quick_run(tmp_path: Path, group: str) -> None:
    modules = GROUPS[group]
    data, stdout, failed = quick_run(tmp_path, modules)
    assert set(data["module_seconds"]) == set(modules) == set(data["module_cpu_seconds"]), failed
    assert min(data["module_cpu_seconds"].values()) >= 0 < sum(data["module_cpu_seconds"].values())
    assert data["quick"] is True and data["soak_s"] == 10
    forked = "forked from the caller's zygotes" if zygote_env() else "as each row says"
    assert data["warps"] == forked, failed
    assert data["machine"]["cpus"] and data["machine"]["nats_server"].startswith("nats-server")

    results = {r["name"]: r for r in data["results"]}
    for module in modules:  # every module contributed rows
        assert data["module_rows"].get(module), (module, failed)
    for name in results:
        assert name in stdout, f"{name!r} missing from the printed table"
    for r in results.values():  # the raw baselines they name were measured in the same run
        if r["baseline"]:
            assert r["baseline"] in results, f"{r['name']}: baseline {r['baseline']!r} was not measured"
    curves = {c["name"]: c for c in data["scale_curves"]}
    assert all(len(c["per_item_us"]) == len(c["sizes"]) for c in curves.values())
    CHECKS[group](results, curves, stdout, failed)


def _tracing(results: dict[str, Any], curves: dict[str, Any], stdout: str, failed: str) -> None:
    assert curves["lease conflict check"]["sizes"] == [100, 1000]
    assert curves["registry list_project"]["sizes"][:3] == [10, 100, 1000]
    for prefix in ("core:", "tracing:", "context path", "context build", "leases:", "forge:"):
        assert any(n.startswith(prefix) for n in results), prefix
    assert any(n.startswith("git commit with loom-guard") for n in results)


def _spinup(results: dict[str, Any], curves: dict[str, Any], stdout: str, failed: str) -> None:
    assert curves["landing: bisect 1 bad"]["sizes"] == [2, 4, 8]
    for prefix in ("spinup:", "a2a:", "landing:", "notify:"):
        assert any(n.startswith(prefix) for n in results), prefix
    # The fleet: real Warp processes at two sizes, none of them taken for offline meanwhile.
    assert curves["fleet: claim, every agent at once"]["sizes"] == [2, 4]
    assert curves["fleet: cold start, all online in Weft"]["sizes"] == [2, 4]
    assert [results[f"fleet: false offline detections @ {n} agents"]["value"] for n in (2, 4)] == [0, 0]
    # the MCP floor under the same load, and the claim's own cost above it against raw
    assert curves["fleet: floor, a no-op call 8 at a time over all agents"]["sizes"] == [2, 4]
    for n in (2, 4):
        for against in ("", ", against raw before the claims"):
            own = results[f"fleet: claim's own cost above the floor{against}, 8 at a time @ {n} agents"]
            assert own["unit"] == "x raw" and own["value"] > 0, own
        # ...and measured side by side in alternating rounds (raw, floor, Warp)
        alternating = results[
            f"fleet: claim's own cost above the floor, alternating with raw, 8 at a time @ {n} agents"
        ]
        assert alternating["value"] > 0 and len(alternating["extra"]["per round"]) == 2, alternating
        at_p99 = results[
            f"fleet: claim's own cost above the floor at p99, alternating with raw, 8 at a time @ {n} agents"
        ]
        # The difference of two tails from 48 samples may fall either side of 0; each tail is there.
        assert all(
            at_p99["extra"][f"{part} samples"] >= 48 and at_p99["extra"][f"{part} p99 (ms)"] > 0
            for part in ("raw", "floor", "claim")
        ), at_p99
        # ...and against raw agents, each a process of its own, in the same rounds
        apart = results[
            f"fleet: claim's own cost above the floor, against raw agent processes, alternating, "
            f"8 at a time @ {n} agents"
        ]
        assert len(apart["extra"]["per round"]) == 2, apart
        assert all(
            len(apart["extra"][f"{part} p50 per round"]) == 2
            for part in ("raw", "apart", "apart floor", "floor", "claim")
        ), apart
        # each side's CPU was counted: a claim and completion cost its processes more than
        # the two no-op calls that stand in for them
        assert apart["extra"]["raw agents' CPU per claim + completion (ms)"] > 0, apart
        assert apart["extra"]["Warps' CPU per claim + completion (ms)"] > 0, apart
        apart_p99 = results[
            f"fleet: claim's own cost above the floor at p99, against raw agent processes, alternating, "
            f"8 at a time @ {n} agents"
        ]
        assert apart_p99["extra"]["apart p99 (ms)"] > apart_p99["extra"]["apart floor p99 (ms)"], apart_p99


def _agents(results: dict[str, Any], curves: dict[str, Any], stdout: str, failed: str) -> None:
    for prefix in ("warp:", "shuttle", "pattern", "questions:", "escalation:", "operator:", "interop:"):
        assert any(n.startswith(prefix) for n in results), prefix
    # With Node and the client's packages (the Makefile installs them), Warp's rows through
    # the TypeScript SDK client are there too.
    ts_ready = (
        shutil.which("node")
        and (PERF / "ts-client" / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()
    )
    ts_rows = [name for name in results if name.endswith("(MCP, TS SDK client)")]
    assert len(ts_rows) == (7 if ts_ready else 0), (ts_rows, failed)
    # ...and from them Warp's own cost above the stdio floor, per message path (its target)
    own = [results[n] for n in ts_rows if "own cost above the floor" in n]
    assert len(own) == (3 if ts_ready else 0) and all(r["value"] is not None for r in own), own


def _fabric(results: dict[str, Any], curves: dict[str, Any], stdout: str, failed: str) -> None:
    for prefix in ("weft:", "weft routing", "soak:", "nats sync", "graph", "console soak:", "console:"):
        assert any(n.startswith(prefix) for n in results), prefix
    for prefix in ("workstream:", "hosts:", "client:"):
        assert any(n.startswith(prefix) for n in results), prefix
    assert curves["weft routing decision"]["sizes"] == [10, 100, 1000, 10000]
    assert curves["graph plan submit+resolve"]["sizes"] == [10, 100]
    assert "scale curves" in stdout and "weft routing decision" in stdout

    soak = results["soak: submit->completed (whole run)"]
    assert soak["samples"] > 0 and soak["extra"]["lost"] == 0, (
        soak["extra"]["lost_items"],
        soak["extra"]["warp_errors"],
    )
    assert len(soak["extra"]["windows"]) >= 2
    assert results["soak: lost items"]["value"] == 0


CHECKS = {"tracing": _tracing, "spinup": _spinup, "agents": _agents, "fabric": _fabric}
"""What each group's run must show beyond rows from every module: its curves, the
TypeScript client's rows, the soak."""
