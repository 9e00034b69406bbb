"""The event loop of an agent's own processes (shared/loop.py): uvloop where installed,
asyncio's own loop where not."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
import uvloop

from shared.loop import anyio_options, run_main
from shared.nats.server import EmbeddedNatsServer, free_port
from testsupport.env import without_fabric
from testsupport.processes import kill_tree
from warp.zygote import ZYGOTE_ENV


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


WATCHED = """
import gc, sys, threading, time
from pathlib import Path

def watch(path):
    seen = None
    while True:
        frozen = gc.get_freeze_count()
        if frozen != seen:
            path.write_text(str(frozen))
            seen = frozen
        time.sleep(0.02)

threading.Thread(target=watch, args=(Path(sys.argv[1]),), daemon=True).start()
part, sys.argv = sys.argv[2], sys.argv[2:]
if part == "warp":
    from warp.cli import main
    sys.exit(main())
from weft.cli import app
app()
"""
"""Runs Warp's or Weft's entry point as its console script does, beside a thread that writes
how many objects the collector has been told to leave alone (``gc.get_freeze_count``)."""


@pytest.mark.parametrize("part", ["warp", "weft"])
def test_a_serving_process_leaves_its_start_up_heap_out_of_later_collections(
    part: str, tmp_path: Path, nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    """Each full collection would otherwise walk every module, model schema and tool the
    process built at start-up (a pause of 85 to 170 ms on two cores)."""
    # Without the suite's zygote too, which the test process has (testsupport/zygote.py): this
    # is the process itself, as its host starts it.
    env = without_fabric(also=(ZYGOTE_ENV,))
    env |= {"NATS_URL": nats_server.url, "LOOM_PROJECT_ID": project_id, "HOME": str(tmp_path)}
    if part == "warp":
        env |= {"LOOM_PROJECT_PATH": str(tmp_path), "LOOM_AGENT_ID": "a" * 32}
        args = [part]
    else:
        env |= {"LOOM_DATA_DIR": str(tmp_path / "data"), "WEFT_NATS_WS_PORT": "-1"}
        args = [part, "serve", "--port", str(free_port())]
    frozen = tmp_path / "frozen"
    proc = subprocess.Popen(
        [sys.executable, "-c", WATCHED, str(frozen), *args],
        env=env,
        stdin=subprocess.PIPE,  # Warp serves MCP on stdio while it stays open
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if frozen.exists() and frozen.read_text() not in ("", "0"):
                break
            time.sleep(0.1)
        assert proc.poll() is None, f"{part} exited: {proc.stderr.read()[-2000:] if proc.stderr else ''}"
        assert int(frozen.read_text()) > 0, f"{part} started without freezing its start-up heap"
    finally:
        kill_tree(proc.pid)
        proc.wait(10)
