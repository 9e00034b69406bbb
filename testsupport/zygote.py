"""Pytest plugin: a Warp, a Pattern and a Shuttle zygote per test process (``warp --zygote``,
``pattern --zygote``, ``shuttle --zygote``: docs/warp.md, docs/pattern.md, docs/shuttle.md).

A test run starts about three hundred Warps, sixty Patterns and four hundred Shuttle
commands; a Warp or a Pattern spends a second or more of CPU importing before it does
anything a test looks at, a Shuttle command a third of a second. Every process that runs
tests starts a zygote of each, and a process started with :func:`zygote_env` in its
environment is forked from it: the same code, each with its own settings, connection and
stdio, and the same handle for whoever started it (signals, exit status, SIGKILL). Those
started without it (tests of their own processes: start-up errors, handshake, stdout, what
they import) run on their own, as agents' hosts and operators start them. The variables
(``testsupport.env.ZYGOTES``) are in this process's environment for the whole run, and
``testsupport.env`` keeps them in the environments it makes for parts (they say how a
process starts, not what it does): whatever a test or a fixture starts (Weft spinning up
agents, a host's launcher, Node's MCP tools, the scenarios' Shuttle) starts forked as well.
A process started in namespaces of its own (``ip netns exec``) is refused by the zygote and
runs on its own.

``LOOM_TEST_ZYGOTE=0`` turns them off for a run (and drops the developer's own variables:
those zygotes are not the tests').
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
from contextlib import contextmanager
from pathlib import Path

import pytest

from testsupport.env import ZYGOTES, without_fabric
from testsupport.processes import children

BIN = Path(sys.executable).parent
SOCKET = "zygote.sock"
READY_S = 60.0
STOP_S = 10.0


class ZygoteProcess:
    """A running ``warp --zygote`` (or Pattern's, or Shuttle's): its process, its socket's
    path, its log."""

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


def start_zygote(log: Path | None = None, program: str = "warp") -> ZygoteProcess | None:
    """A ``warp --zygote`` (or ``pattern``'s, ``shuttle``'s) of its own, listening once this returns
    (None when it did not start within :data:`READY_S`; the processes then start on their
    own: slower, not wrong). Its socket sits in a short temporary folder (a socket's path is
    at most 107 bytes); its log is ``log``, or beside the socket."""
    return _listening(_launch(log, program))


@contextmanager
def own_zygote(folder: Path, program: str) -> Iterator[ZygoteProcess]:
    """A zygote of a test's own, its log in ``folder``, stopped on exit: the tests of the
    zygotes themselves leave the suite's out."""
    log = folder / "zygote.log"
    started = start_zygote(log, program=program)
    assert started is not None, log.read_text()
    try:
        yield started
    finally:
        started.stop()


def _launch(log: Path | None, program: str) -> ZygoteProcess:
    folder = tempfile.mkdtemp(prefix=f"loom-{program}-zygote-")
    log = log or Path(folder) / "zygote.log"
    env = without_fabric()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(BIN / program), "--zygote", os.path.join(folder, SOCKET)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    return ZygoteProcess(proc, folder, log)


def _listening(zygote: ZygoteProcess) -> ZygoteProcess | None:
    deadline = time.monotonic() + READY_S
    while not os.path.exists(zygote.path):
        if zygote.proc.poll() is not None or time.monotonic() > deadline:
            zygote.stop()
            return None
        time.sleep(0.02)
    return zygote


_running: dict[str, ZygoteProcess] = {}
"""This test process's zygotes, by the variable that points at each."""


def zygote_env() -> dict[str, str]:
    """What a Warp's, a Pattern's or a Shuttle's environment needs to be forked from this
    process's zygotes (nothing when it has none)."""
    return {name: zygote.path for name, zygote in _running.items()}


def pytest_configure(config: pytest.Config) -> None:
    for name in ZYGOTES.values():
        os.environ.pop(name, None)  # a developer's own zygote is not the tests'
    if os.environ.get("LOOM_TEST_ZYGOTE", "1") == "0":
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller runs no tests: its workers start their own
    launched = {name: _launch(None, program) for program, name in ZYGOTES.items()}  # side by side
    for name, started in launched.items():
        zygote = _listening(started)
        if zygote is not None:
            _running[name] = zygote
            os.environ[name] = zygote.path


def pytest_unconfigure(config: pytest.Config) -> None:
    running = dict(_running)
    _running.clear()
    for name, zygote in running.items():
        os.environ.pop(name, None)
        zygote.stop()
