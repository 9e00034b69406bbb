"""The performance suite's own logic: durations, scale curves and their growth check."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[2] / "test-scenarios" / "performance"
sys.path.insert(0, str(PERF))

from benchlib import BenchResult, concurrently, render_curves, scale_curves  # noqa: E402
from run import ModuleTimeout, parse_duration, run_bounded  # noqa: E402

from testsupport.processes import descendants, kill_tree, pid_alive  # noqa: E402


def at(name: str, n: int, p50: float, unit: str = "agents") -> BenchResult:
    return BenchResult(name=f"{name} @ {n} {unit}", p50=p50)


def test_durations() -> None:
    assert parse_duration("10m") == 600
    assert parse_duration("90s") == 90
    assert parse_duration("1h") == 3600
    assert parse_duration("45") == 45


@pytest.mark.parametrize("bad", ["", "ten", "5x", "-1m", "0"])
def test_bad_durations_name_the_flag(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--soak"):
        parse_duration(bad)


def test_a_stalled_module_fails_by_name_with_where_it_waits(capsys: pytest.CaptureFixture[str]) -> None:
    async def stalled_wait() -> list[BenchResult]:
        await asyncio.Event().wait()
        return []

    async def stalls() -> list[BenchResult]:
        return await stalled_wait()

    with pytest.raises(ModuleTimeout, match=r"bench_stall ran past 0\.2s"):
        asyncio.run(run_bounded(stalls(), "bench_stall", 0.2))
    err = capsys.readouterr().err
    assert "bench_stall is past 0.2s" in err and "stalled_wait" in err


def test_a_module_within_its_time_gives_its_rows() -> None:
    async def quick() -> list[BenchResult]:
        return [BenchResult(name="row", p50=1.0)]

    assert [r.name for r in asyncio.run(run_bounded(quick(), "bench_quick", 5.0))] == ["row"]


def test_linear_curve_passes_and_reports_per_agent_cost() -> None:
    results = [at("listing", n, n * 0.01) for n in (10, 100, 1000, 10000)]
    (curve,) = scale_curves(results)
    assert curve.name == "listing" and curve.unit == "agents" and curve.sizes == [10, 100, 1000, 10000]
    assert curve.per_item_us == pytest.approx([10.0] * 4)
    assert curve.slopes == pytest.approx([1.0, 1.0, 1.0])
    assert curve.no_worse_than_linear
    assert "growth 1.00 -> ok" in render_curves([curve])


def test_quadratic_curve_is_flagged() -> None:
    results = [at("routing", n, (n / 100) ** 2) for n in (100, 1000, 10000)]
    (curve,) = scale_curves(results)
    assert curve.worst_slope == pytest.approx(2.0)
    assert not curve.no_worse_than_linear
    assert "WORSE THAN LINEAR" in render_curves([curve])


def test_curves_group_by_name_and_accept_compact_sizes() -> None:
    results = [
        BenchResult(name="recall @100", p50=0.2),
        BenchResult(name="recall @10000", p50=0.3),
        BenchResult(name="index load @100", value=5.0),
        BenchResult(name="index load @10,000", value=400.0),
        BenchResult(name="submissions @ 100 agents", unit="ops", throughput=900.0),  # not a cost
        BenchResult(name="lonely @ 10 agents", p50=1.0),  # one size: no curve
        BenchResult(name="no size here", p50=1.0),
    ]
    curves = {c.name: c for c in scale_curves(results)}
    assert set(curves) == {"recall", "index load"}
    assert curves["recall"].worst_slope == pytest.approx(0.088, abs=0.001)  # nearly flat
    assert curves["index load"].sizes == [100, 10000]


async def test_concurrently_runs_every_op_once_with_at_most_that_many_at_a_time() -> None:
    seen: list[int] = []
    running = 0
    most = 0

    async def op(i: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        seen.append(i)
        running -= 1

    elapsed = await concurrently(50, 4, op)
    assert sorted(seen) == list(range(50)) and most == 4 and elapsed >= 0


def test_kill_tree_reaches_a_child_in_a_session_of_its_own() -> None:
    """The perf smoke's timeout path: the run's nats-server is started with a session of its
    own, which killing the run's process group does not reach."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
            " start_new_session=True)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert descendants(parent.pid) == {child}
    kill_tree(parent.pid)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)
