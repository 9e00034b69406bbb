"""Processes as Linux's /proc shows them: their children, their memory, their CPU time.

A process started in a session of its own (the embedded nats-server) is not reached by
killing its parent's process group; a test that must stop everything a run started walks
the tree first. The benches read a process's memory and CPU time from here."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return _state(stat) != "Z"


def _state(stat: str) -> str:
    return stat.rsplit(")", 1)[-1].split()[0]


@contextlib.contextmanager
def frozen(pid: int, timeout: float = 10.0) -> Iterator[None]:
    """``pid`` stopped (SIGSTOP) for the block: its sockets stay open but nothing answers, a
    server slow beyond any deadline. Returns once every thread is stopped (the signal is
    delivered asynchronously); continues it (SIGCONT) however the block ends."""
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + timeout
        tasks = Path(f"/proc/{pid}/task")
        while any(_state((task / "stat").read_text()) not in ("T", "t") for task in tasks.iterdir()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"process {pid} did not stop within {timeout:g}s")
            time.sleep(0.01)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def children(pid: int) -> set[int]:
    """The processes ``pid`` started and that still run ("" once it is gone)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found.update(int(child) for child in (task / "children").read_text().split())
    return found


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``, at any depth."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


def holding_pipes(inodes: set[int]) -> set[int]:
    """Every other process holding an end of one of the pipes ``inodes`` names (``os.fstat``
    of this process's end): the process that reads what this one writes into a pipe, even
    when it is not the one started on it (a Warp forked from a zygote holds its stand-in's
    stdio, the stand-in none; docs/warp.md)."""
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    me = os.getpid()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in wanted for fd in (entry / "fd").iterdir()):
                found.add(int(entry.name))
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything below it, in sessions of their own or not."""
    below = descendants(pid)
    for target in (pid, *below):
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


def rss_mb(pid: int) -> float:
    """The process's resident memory in MB; ``ProcessLookupError`` once it is gone (a zombie
    has no memory left to show)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ProcessLookupError(f"process {pid} holds no memory")


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MB: PSS shares each page among the processes mapping it."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            found[key] = int(rest.split()[0]) / 1024
    return found["Rss"], found["Pss"]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def maps_package(pid: int, package: str) -> bool:
    """Whether process ``pid`` has ``package``'s compiled modules in its memory map: seen from
    outside, that it imported the package (for one that ships extension modules)."""
    return f"/{package}/" in Path(f"/proc/{pid}/maps").read_text()
