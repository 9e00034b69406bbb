"""Pytest plugin: one Warp zygote per test process (``warp --zygote``, docs/warp.md).

A test run starts about three hundred Warps; each spends about a second of CPU importing
before it does anything a test looks at. Every process that runs tests starts a zygote, and
a Warp started with :func:`zygote_env` in its environment is forked from it: the same
``warp`` code, each with its own settings, connection and stdio, and the same handle for
whoever started it (signals, exit status, SIGKILL). Warps started without it (tests of
Warp's own process: its start-up errors, handshake and stdout) run on their own, as agents'
hosts start them. ``LOOM_WARP_ZYGOTE`` is in this process's environment for the whole run,
and ``testsupport.env`` keeps it in the environments it makes for parts (it says how a Warp
starts, not what it does): whatever a test or a fixture starts (Weft spinning up agents, a
host's launcher, Node's MCP tools) starts its Warps forked as well. A Warp started in
namespaces of its own (``ip netns exec``) is refused by the zygote and runs on its own.

``LOOM_TEST_ZYGOTE=0`` turns it off for a run (and drops a ``LOOM_WARP_ZYGOTE`` of the
developer's own: that zygote is not the tests').
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from testsupport.env import without_fabric
from testsupport.processes import children
from warp.zygote import ZYGOTE_ENV

WARP = str(Path(sys.executable).parent / "warp")
SOCKET = "warp.sock"
READY_S = 60.0
STOP_S = 10.0


class ZygoteProcess:
    """A running ``warp --zygote``: its process, its socket's path, its log."""

    def __init__(self, proc: subprocess.Popen[bytes], folder: str, log: Path) -> None:
        self.proc, self.folder, self.log = proc, folder, log
        self.path = os.path.join(folder, SOCKET)

    @property
    def children(self) -> set[int]:
        """The Warps it forked that still run."""
        return children(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM (it stops listening and waits for its Warps), then SIGKILL after
        :data:`STOP_S`; its socket's folder removed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_zygote(log: Path | None = None) -> ZygoteProcess | None:
    """A ``warp --zygote`` of its own, listening once this returns (None when it did not
    start within :data:`READY_S`; Warps then start on their own: slower, not wrong). Its
    socket sits in a short temporary folder (a socket's path is at most 107 bytes); its
    log is ``log``, or beside the socket."""
    folder = tempfile.mkdtemp(prefix="loom-zygote-")
    log = log or Path(folder) / "zygote.log"
    env = without_fabric()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [WARP, "--zygote", os.path.join(folder, SOCKET)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    zygote = ZygoteProcess(proc, folder, log)
    deadline = time.monotonic() + READY_S
    while not os.path.exists(zygote.path):
        if proc.poll() is not None or time.monotonic() > deadline:
            zygote.stop()
            return None
        time.sleep(0.02)
    return zygote


class _Running:
    zygote: ZygoteProcess | None = None
    path: str | None = None


_running = _Running()


def zygote_env() -> dict[str, str]:
    """What a Warp's environment needs to be forked from this process's zygote (nothing
    when it has none)."""
    return {ZYGOTE_ENV: _running.path} if _running.path else {}


def pytest_configure(config: pytest.Config) -> None:
    os.environ.pop(ZYGOTE_ENV, None)  # a developer's own zygote is not the tests'
    if os.environ.get("LOOM_TEST_ZYGOTE", "1") == "0":
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller runs no tests: its workers start their own
    zygote = start_zygote()
    if zygote is not None:
        _running.zygote, _running.path = zygote, zygote.path
        os.environ[ZYGOTE_ENV] = zygote.path


def pytest_unconfigure(config: pytest.Config) -> None:
    zygote = _running.zygote
    _running.zygote = _running.path = None
    os.environ.pop(ZYGOTE_ENV, None)
    if zygote is not None:
        zygote.stop()
