"""Helpers for the performance suite: timing, percentiles, and the result table.

Each ``bench_*.py`` module next to this file exposes
``async def run(ctx: BenchContext) -> list[BenchResult]``; ``run.py`` discovers
them, runs them against one shared nats-server, prints one table and writes
``results.json``. Raw nats-py baselines are measured in the same run and
referenced by name so the table can show the ratio.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


def launch_env() -> dict[str, str]:
    """What a Warp's or a Pattern's environment carries for it to start as this run says:
    forked from the caller's zygotes (``--forked``), else nothing (each on its own)."""
    # Imported here: a bench's own subprocess (bench_tracing's) loads this module without the
    # repository's root on its path, and never starts an agent.
    from testsupport.env import ZYGOTES

    return {name: os.environ[name] for name in ZYGOTES.values() if name in os.environ}


@dataclass
class BenchContext:
    nats_url: str
    websocket_url: str | None
    scratch: Path
    quick: bool = False
    """Fewer iterations (used by the smoke test in ``make test``)."""
    soak_s: float = 0.0
    sizes: tuple[int, ...] = ()
    """Only these sizes, where a module measures several (``--sizes``; all when empty)."""

    def sizes_of(self, full: tuple[int, ...], quick: tuple[int, ...]) -> tuple[int, ...]:
        return self.sizes or (quick if self.quick else full)

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


async def concurrently(total: int, concurrency: int, op: Callable[[int], Awaitable[Any]]) -> float:
    """Run ``op(i)`` for i in range(total) with ``concurrency`` workers; returns elapsed seconds."""
    counter = iter(range(total))

    async def worker() -> None:
        for i in counter:
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


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


# -- scale curves ------------------------------------------------------------------------

_AT_SIZE = re.compile(r"^(?P<curve>.*?)\s*@\s*(?P<n>\d[\d,]*)(?:\s+(?P<unit>[a-z]+))?\s*$")
GROWTH_SLACK = 1.25
"""A step's log-log slope may exceed 1.0 (linear) by this much before the curve is flagged:
timings on a shared machine wobble, and a truly super-linear cost shows up as 2.0 (quadratic)."""


@dataclass
class ScaleCurve:
    """One measurement at growing sizes (``<name> @ <N> <unit>`` results)."""

    name: str
    unit: str
    sizes: list[int]
    cost_ms: list[float]
    """p50 (or the single value) at each size."""

    @property
    def per_item_us(self) -> list[float]:
        return [cost * 1000 / n for cost, n in zip(self.cost_ms, self.sizes, strict=True)]

    @property
    def slopes(self) -> list[float]:
        """log(cost) / log(size) between neighbouring sizes: 1.0 is linear, 0 is flat, 2.0 quadratic."""
        found: list[float] = []
        for (n0, c0), (n1, c1) in itertools.pairwise(zip(self.sizes, self.cost_ms, strict=True)):
            if c0 > 0 and c1 > 0 and n1 > n0:
                found.append(math.log(c1 / c0) / math.log(n1 / n0))
        return found

    @property
    def worst_slope(self) -> float | None:
        return max(self.slopes) if self.slopes else None

    @property
    def no_worse_than_linear(self) -> bool:
        worst = self.worst_slope
        return worst is None or worst <= GROWTH_SLACK

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "sizes": self.sizes,
            "cost_ms": self.cost_ms,
            "per_item_us": self.per_item_us,
            "slopes": self.slopes,
            "no_worse_than_linear": self.no_worse_than_linear,
        }


def scale_curves(results: list[BenchResult]) -> list[ScaleCurve]:
    """Group results named ``<curve> @ <N> [unit]`` into curves (3 or more sizes... or 2)."""
    groups: dict[str, list[tuple[int, float, str]]] = {}
    for r in results:
        match = _AT_SIZE.match(r.name)
        cost = r.p50 if r.p50 is not None else r.value
        if match is None or cost is None or r.unit != "ms":
            continue
        n = int(match["n"].replace(",", ""))
        groups.setdefault(match["curve"], []).append((n, cost, match["unit"] or "items"))
    curves = []
    for name, points in groups.items():
        points.sort()
        if len(points) >= 2:
            curves.append(ScaleCurve(name, points[0][2], [p[0] for p in points], [p[1] for p in points]))
    return curves


def render_curves(curves: list[ScaleCurve]) -> str:
    if not curves:
        return ""
    lines = [
        "",
        "scale curves (p50; per-item cost; growth = worst log-log slope between sizes, 1.0 = linear)",
    ]
    for c in curves:
        points = "  ".join(
            f"{n:>6}: {cost:9.3f} ms ({per:8.3f} us/{c.unit.rstrip('s')})"
            for n, cost, per in zip(c.sizes, c.cost_ms, c.per_item_us, strict=True)
        )
        worst = c.worst_slope
        verdict = "ok" if c.no_worse_than_linear else "WORSE THAN LINEAR"
        lines.append(f"  {c.name}")
        lines.append(f"    {points}")
        lines.append(f"    growth {worst:.2f} -> {verdict}" if worst is not None else "    growth -")
    return "\n".join(lines)
