"""Run the performance suite: ``make bench`` (or ``python run.py --quick``).

Starts one nats-server, runs every ``bench_*.py`` module's ``run(ctx)`` against
it, prints a table and writes ``results.json`` next to this file (or ``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
for path in (str(HERE), str(ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)

from benchlib import BenchContext, BenchResult, attach_ratios, render_table  # noqa: E402

from shared.server import EmbeddedNatsServer, ServerConfig  # noqa: E402


def parse_duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


def discover(only: list[str]) -> list[Path]:
    modules = sorted(HERE.glob("bench_*.py"))
    if only:
        modules = [m for m in modules if any(o in m.stem for o in only)]
    return modules


async def run_all(args: argparse.Namespace) -> tuple[list[BenchResult], list[str]]:
    results: list[BenchResult] = []
    failures: list[str] = []
    with (
        EmbeddedNatsServer(ServerConfig(websocket_port=-1)) as server,
        tempfile.TemporaryDirectory(prefix="loom-bench-") as scratch,
    ):
        ctx = BenchContext(
            nats_url=server.url,
            websocket_url=server.websocket_url,
            scratch=Path(scratch),
            quick=args.quick,
            soak_s=parse_duration(args.soak) if args.soak else 0.0,
        )
        for module_path in discover(args.only):
            spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            started = time.perf_counter()
            print(f"# {module_path.stem} ...", file=sys.stderr, flush=True)
            try:
                results.extend(await module.run(ctx))
            except Exception:
                failures.append(module_path.stem)
                traceback.print_exc()
            print(f"# {module_path.stem} done in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    attach_ratios(results)
    return results, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke run)")
    parser.add_argument("--only", nargs="*", default=[], help="run bench modules whose name contains these")
    parser.add_argument("--soak", default="", help="soak duration, e.g. 10m (bench modules that support it)")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    results, failures = asyncio.run(run_all(args))
    print(render_table(results))
    payload = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": __import__("os").cpu_count(),
        },
        "quick": args.quick,
        "results": [r.to_dict() for r in results],
        "failures": failures,
    }
    args.out.write_text(json.dumps(payload, indent=2))
    print(f"wrote {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
