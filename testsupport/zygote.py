"""Pytest plugin: one Warp zygote per test process (``warp --zygote``, docs/warp.md).

A test run starts about three hundred Warps; each spends about a second of CPU importing
before it does anything a test looks at. Every process that runs tests starts a zygote, and
a Warp started with :func:`zygote_env` in its environment is forked from it: the same
``warp`` code, each with its own settings, connection and stdio, and the same handle for
whoever started it (signals, exit status, SIGKILL). Warps started without it (tests of
Warp's own process: its start-up errors, handshake and stdout) run on their own, as agents'
hosts start them. While a test runs, ``LOOM_WARP_ZYGOTE`` is in this process's environment
too (the test directories' fixtures clear ``LOOM_*`` before it), so the Warps of agents
that Weft spins up for it, which inherit that environment, are forked as well.

``LOOM_TEST_ZYGOTE=0`` turns it off for a run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from warp.zygote import ZYGOTE_ENV

WARP = str(Path(sys.executable).parent / "warp")
READY_S = 60.0
STOP_S = 10.0


class _Running:
    proc: subprocess.Popen[bytes] | None = None
    folder: str | None = None
    path: str | None = None


_running = _Running()


def zygote_env() -> dict[str, str]:
    """What a Warp's environment needs to be forked from this process's zygote (nothing
    when it has none)."""
    return {ZYGOTE_ENV: _running.path} if _running.path else {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The test itself runs with ``LOOM_WARP_ZYGOTE`` set (see the module's docstring)."""
    if _running.path is None or ZYGOTE_ENV in os.environ:
        return (yield)
    os.environ[ZYGOTE_ENV] = _running.path
    try:
        return (yield)
    finally:
        os.environ.pop(ZYGOTE_ENV, None)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("LOOM_TEST_ZYGOTE", "1") == "0":
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller runs no tests: its workers start their own
    folder = tempfile.mkdtemp(prefix="loom-zygote-")  # short: a socket path has 107 bytes
    path = os.path.join(folder, "warp.sock")
    log = open(os.path.join(folder, "zygote.log"), "wb")  # noqa: SIM115 - the zygote's for its life
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "LOOM_", "WEFT_"))}
    proc = subprocess.Popen(
        [WARP, "--zygote", path],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + READY_S
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            shutil.rmtree(folder, ignore_errors=True)
            return  # Warps start on their own: slower, not wrong
        time.sleep(0.02)
    _running.proc, _running.folder, _running.path = proc, folder, path


def pytest_unconfigure(config: pytest.Config) -> None:
    proc, folder = _running.proc, _running.folder
    if proc is None or folder is None:
        return
    _running.path = None
    proc.send_signal(signal.SIGTERM)  # stops listening; waits for the Warps still running
    try:
        proc.wait(STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(folder, ignore_errors=True)
    _running.proc = _running.folder = None
