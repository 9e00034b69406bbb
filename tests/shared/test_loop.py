"""The event loop of an agent's own processes (shared/loop.py): uvloop where installed,
asyncio's own loop where not."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import uvloop

from shared.loop import anyio_options, run_main


async def _loop_kind() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_run_main_runs_on_uvloop_and_returns_the_result() -> None:
    assert run_main(_loop_kind()) == uvloop.Loop.__module__
    assert anyio_options() == {"use_uvloop": True}


FALLBACK = """
import asyncio, sys
sys.modules["uvloop"] = None  # as where it is not installed
from shared.loop import anyio_options, run_main
async def kind():
    return type(asyncio.get_running_loop()).__module__
print(run_main(kind()), anyio_options()["use_uvloop"])
"""


def test_without_uvloop_it_is_asyncios_own_loop() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["asyncio.unix_events", "False"]
