"""Run the performance suite: ``make bench`` (or ``python run.py --quick``).

Starts one nats-server, runs every ``bench_*.py`` module's ``run(ctx)`` against it, prints
one table (p50/p95/p99, throughput, ratio to the raw nats-py baseline, target), then the
scale curves (every ``<name> @ <N> <unit>`` series: per-item cost at each size and a growth
check), and writes ``results.json`` next to this file (or ``--out``).

``--soak 10m`` runs the soak instead (``bench_soak``: steady load, agents joining and
leaving, latency and memory drift over time); add ``--only`` to run other modules with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import gc
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
for path in (str(HERE), str(ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)

from benchlib import (  # noqa: E402
    BenchContext,
    BenchResult,
    attach_ratios,
    render_curves,
    render_table,
    scale_curves,
)

from shared.nats.server import EmbeddedNatsServer, ServerConfig, find_binary  # noqa: E402
from testsupport.env import ZYGOTES  # noqa: E402
from testsupport.processes import cpu_seconds  # noqa: E402

QUICK_MODULE_TIMEOUT_S = 240.0
"""A quick module takes under a minute even on a loaded machine; this bounds a stall well
inside the perf smoke's limit for its whole group, so the stall is the failure reported."""


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h`` -> seconds; anything else is a usage error."""
    units = {"s": 1, "m": 60, "h": 3600}
    raw = text.strip().lower()
    scale = units.get(raw[-1:]) if raw else None
    number = raw[:-1] if scale else raw
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--soak: {text!r} is not a duration (e.g. 90s, 10m, 1h)") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("--soak: must be more than 0 seconds")
    return seconds


def discover(only: list[str]) -> list[Path]:
    modules = sorted(HERE.glob("bench_*.py"))
    if only:
        modules = [m for m in modules if any(o in m.stem for o in only)]
    return modules


def load(module_path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, so dataclasses and pickling in the module can find it.
    sys.modules[module_path.stem] = module
    spec.loader.exec_module(module)
    return module


def module_cpu_seconds(nats_pid: int | None) -> float:
    """CPU used so far by this process, the children it has reaped (a module's Warps,
    Wefts, clients) and the shared nats-server, which runs until the end: what a module
    costs the machine is the difference across it."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + reaped.ru_utime + reaped.ru_stime
    if nats_pid is not None:
        with contextlib.suppress(OSError, ValueError, IndexError):  # not Linux: left out
            total += cpu_seconds(nats_pid)
    return total


async def run_all(
    args: argparse.Namespace,
) -> tuple[list[BenchResult], dict[str, str], dict[str, tuple[float, float]], dict[str, list[str]]]:
    results: list[BenchResult] = []
    failures: dict[str, str] = {}  # each failed module and its traceback (the end of it)
    timings: dict[str, tuple[float, float]] = {}  # each module's wall and CPU seconds
    rows: dict[str, list[str]] = {}  # each module's row names: which module measured what
    with (
        EmbeddedNatsServer(ServerConfig(websocket_port=-1)) as server,
        tempfile.TemporaryDirectory(prefix="loom-bench-") as scratch,
    ):
        ctx = BenchContext(
            nats_url=server.url,
            websocket_url=server.websocket_url,
            scratch=Path(scratch),
            quick=args.quick,
            soak_s=args.soak or 0.0,
            sizes=tuple(args.sizes),
        )
        for module_path in discover(args.only):
            # What earlier modules left on the heap is frozen out of the collector, so its
            # garbage-collection passes do not tax this module's client-side timings.
            gc.collect()
            gc.freeze()
            started, cpu_before = time.perf_counter(), module_cpu_seconds(server.pid)
            print(f"# {module_path.stem} ...", file=sys.stderr, flush=True)
            try:
                measured = await run_bounded(
                    load(module_path).run(ctx), module_path.stem, args.module_timeout
                )
                results.extend(measured)
                rows[module_path.stem] = [r.name for r in measured]
            except Exception:
                failures[module_path.stem] = traceback.format_exc()[-4000:]
                traceback.print_exc()
            wall, cpu = time.perf_counter() - started, module_cpu_seconds(server.pid) - cpu_before
            timings[module_path.stem] = (round(wall, 1), round(cpu, 1))
            print(f"# {module_path.stem} done in {wall:.1f}s, {cpu:.1f}s of CPU", file=sys.stderr)
    attach_ratios(results)
    return results, failures, timings, rows


class ModuleTimeout(Exception):
    """A module ran past ``--module-timeout``; every task's stack was printed first."""


async def run_bounded(
    measuring: Coroutine[Any, Any, list[BenchResult]], name: str, limit: float | None
) -> list[BenchResult]:
    """Run one module; past ``limit`` seconds print where every task waits, then cancel it.

    A stalled module then fails by name with the awaits that held it, while the event loop
    still runs; a loop blocked by synchronous code is caught by :mod:`faulthandler`'s dump
    of every thread a little later."""
    task = asyncio.ensure_future(measuring)
    if limit is not None:
        faulthandler.dump_traceback_later(limit + 30, exit=False, file=sys.__stderr__)
    try:
        done, _ = await asyncio.wait({task}, timeout=limit)
        if not done:
            print(f"# {name} is past {limit:g}s; where each task waits:", file=sys.stderr)
            for other in asyncio.all_tasks():
                if other is not asyncio.current_task():
                    print(f"  {other.get_name()}:", *where_it_waits(other), sep="\n    ", file=sys.stderr)
            task.cancel()
            await asyncio.wait({task}, timeout=15)
            raise ModuleTimeout(f"{name} ran past {limit:g}s")
        return task.result()
    finally:
        if limit is not None:
            faulthandler.cancel_dump_traceback_later()


def where_it_waits(task: asyncio.Task[Any]) -> list[str]:
    """The chain of awaits a suspended task is in, outermost first (``Task.print_stack``
    shows only the outermost coroutine's frame)."""
    lines: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            lines.append(f"awaiting {type(awaited).__name__}")
            break
        lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return lines


def machine() -> dict[str, Any]:
    """Where the figures came from."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    try:
        cpu = [
            line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")
        ]
        info["cpu"] = cpu[0].split(":", 1)[1].strip() if cpu else platform.processor()
        mem = next(
            line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
        )
        info["memory_gb"] = round(int(mem.split()[1]) / 1024 / 1024, 1)
        info["load_avg_at_start"] = list(os.getloadavg())
    except (OSError, StopIteration):
        pass
    try:
        out = subprocess.run([str(find_binary()), "--version"], capture_output=True, text=True, timeout=10)
        info["nats_server"] = out.stdout.strip()
    except Exception:  # the version is a nicety; the run itself will fail loudly without a server
        info["nats_server"] = "unknown"
    return info


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke run)")
    parser.add_argument("--only", nargs="*", default=[], help="run bench modules whose name contains these")
    parser.add_argument(
        "--soak", type=parse_duration, default=None, help="soak for this long instead (e.g. 60s, 10m)"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument(
        "--sizes", nargs="*", type=int, default=[], help="only these sizes (e.g. agents in bench_fleet)"
    )
    parser.add_argument(
        "--module-timeout",
        type=float,
        default=None,
        help="seconds: fail a module that runs longer, printing where it waits (240 with --quick)",
    )
    parser.add_argument(
        "--forked",
        action="store_true",
        help="keep LOOM_WARP_ZYGOTE, LOOM_PATTERN_ZYGOTE, LOOM_SHUTTLE_ZYGOTE and LOOM_WEFT_ZYGOTE: "
        "every Warp, Pattern, Shuttle command and Weft forks from those zygotes (a smoke run: "
        "start-up and memory rows lose their meaning)",
    )
    args = parser.parse_args()
    # Each row's processes start as the row says: on their own as hosts start them, or forked from
    # bench_fleet's own zygote. Not from one this shell (or the test suite) points at, unless
    # asked: the suite's smoke run judges no figure, and forking its Warps saves CPU it needs.
    forked = args.forked and any(name in os.environ for name in ZYGOTES.values())
    if not forked:
        for name in ZYGOTES.values():
            os.environ.pop(name, None)
    if args.module_timeout is None and args.quick:
        args.module_timeout = QUICK_MODULE_TIMEOUT_S
    if args.soak and not args.only:
        args.only = ["soak"]
    host = machine()
    started = time.time()
    results, failures, timings, rows = asyncio.run(run_all(args))
    curves = scale_curves(results)
    print(render_table(results))
    if forked:
        print(
            "Warps, Patterns, Shuttle commands and Wefts forked from the caller's zygotes: "
            "start-up and memory rows are not theirs"
        )
    text = render_curves(curves)
    if text:
        print(text)
    payload = {
        "machine": host,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "wall_s": round(time.time() - started, 1),
        "quick": args.quick,
        "soak_s": args.soak,
        "warps": "forked from the caller's zygotes" if forked else "as each row says",
        "module_seconds": {name: wall for name, (wall, _) in timings.items()},
        "module_cpu_seconds": {name: cpu for name, (_, cpu) in timings.items()},
        "module_rows": rows,
        "results": [r.to_dict() for r in results],
        "scale_curves": [c.to_dict() for c in curves],
        "failures": list(failures),
        "failure_details": failures,
    }
    args.out.write_text(json.dumps(payload, indent=2, default=str))
    print(f"wrote {args.out}")
    if failures:
        print(f"FAILED modules: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
