"""Helpers for the performance suite: timing, percentiles, and the result table.

Each ``bench_*.py`` module next to this file exposes
``async def run(ctx: BenchContext) -> list[BenchResult]``; ``run.py`` discovers
them, runs them against one shared nats-server, prints one table and writes
``results.json``. Raw nats-py baselines are measured in the same run and
referenced by name so the table can show the ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BenchContext:
    nats_url: str
    websocket_url: str | None
    scratch: Path
    quick: bool = False
    """Fewer iterations (used by the smoke test in ``make test``)."""
    soak_s: float = 0.0

    def iterations(self, full: int, quick: int = 20) -> int:
        return quick if self.quick else full


@dataclass
class BenchResult:
    name: str
    unit: str = "ms"
    samples: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    throughput: float | None = None
    """Operations per second, where that is the figure of merit."""
    value: float | None = None
    """A single figure (RSS in MB, a wall time) when percentiles do not apply."""
    baseline: str | None = None
    """Name of the raw nats-py result this one is compared with."""
    ratio: float | None = None
    target: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: list[float], pct: float) -> float:
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100.0
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summarize(name: str, samples_ms: list[float], **kwargs: Any) -> BenchResult:
    return BenchResult(
        name=name,
        samples=len(samples_ms),
        p50=percentile(samples_ms, 50),
        p95=percentile(samples_ms, 95),
        p99=percentile(samples_ms, 99),
        mean=statistics.fmean(samples_ms),
        **kwargs,
    )


async def time_async(op: Callable[[], Awaitable[Any]], iterations: int, warmup: int = 5) -> list[float]:
    """Run ``op`` ``warmup + iterations`` times; return the timed samples in ms."""
    for _ in range(warmup):
        await op()
    samples: list[float] = []
    for _ in range(iterations):
        start = time.perf_counter()
        await op()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def attach_ratios(results: list[BenchResult]) -> None:
    by_name = {r.name: r for r in results}
    for r in results:
        base = by_name.get(r.baseline or "")
        if base is not None and base.p50 and r.p50 is not None:
            r.ratio = r.p50 / base.p50


def render_table(results: list[BenchResult]) -> str:
    def f(v: float | None, digits: int = 2) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    header = (
        f"{'benchmark':<44} {'unit':>5} {'n':>6} {'p50':>9} {'p95':>9} {'p99':>9} "
        f"{'ops/s':>9} {'value':>9} {'x raw':>6}  target"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.name:<44} {r.unit:>5} {r.samples:>6} {f(r.p50):>9} {f(r.p95):>9} {f(r.p99):>9} "
            f"{f(r.throughput, 0):>9} {f(r.value):>9} {f(r.ratio, 1):>6}  {r.target or ''}"
        )
    return "\n".join(lines)
