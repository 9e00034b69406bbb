"""Child processes of a test's subprocess, read from Linux's /proc.

A process started in a session of its own (the embedded nats-server) is not reached by
killing its parent's process group; a test that must stop everything a run started walks
the tree first."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


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


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything below it, in sessions of their own or not."""
    below = descendants(pid)
    for target in (pid, *below):
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
