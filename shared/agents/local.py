"""Which agent a hook works for: the Warp that the same agent host started (docs/hosts.md).

An agent host (Claude Code, a CLI) starts Warp and runs its hooks as children of one
process. Warp notes itself under that process's id, ``<project>/.loom/agents/<pid>.json``;
a hook (the edit-time lease guard, ``loom-guard`` at a commit) walks up its own parents and
takes the note of the nearest one whose Warp still runs. Several sessions in one folder,
each with a Warp of its own (instance ids, warp/instances.py), each find their own, so an
agent's own exclusive leases never refuse its own edits. Only the file system and
``/proc`` are read: a hook starts in milliseconds and needs neither NATS nor Weft for it.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

NOTES_DIR: Final = Path(".loom") / "agents"
MAX_DEPTH: Final = 64
"""Parents walked at most (a hook is a few levels below its host)."""


@dataclass(frozen=True)
class LocalAgent:
    agent_id: str
    handle: str
    pid: int
    """Warp's process, alive while the note holds."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


_host: list[int] = []
"""The host a Warp forked for it runs for (shared/zygote.py), when this process is one."""


def forked_for(host: int) -> None:
    """This process was forked by Warp's zygote for a ``warp`` that ``host`` started: its
    agent host is that process, not the zygote that is its parent."""
    _host[:] = [host]


def agent_host() -> int:
    """The process that started this Warp: its parent, or the one a forked Warp was started
    for (:func:`forked_for`)."""
    return _host[0] if _host else os.getppid()


def note_path(project_path: Path, host_pid: int) -> Path:
    return project_path / NOTES_DIR / f"{host_pid}.json"


def write_note(project_path: Path, agent: LocalAgent, *, host_pid: int | None = None) -> Path | None:
    """Warp: note which agent it is for the hooks its host runs (None when the project
    folder cannot be written: the hooks then fall back to ``LOOM_AGENT_ID``)."""
    path = note_path(project_path, agent_host() if host_pid is None else host_pid)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ignore = path.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps(asdict(agent)))
        staged.replace(path)
    except OSError:
        return None
    return path


def remove_note(path: Path | None, agent_id: str) -> None:
    """Warp stopping: its note goes, unless another Warp of the same host replaced it."""
    if path is None:
        return
    found = read_note(path)
    if found is not None and found.agent_id == agent_id:
        with contextlib.suppress(OSError):
            path.unlink()


def read_note(path: Path) -> LocalAgent | None:
    try:
        raw = json.loads(path.read_text())
        return LocalAgent(agent_id=str(raw["agent_id"]), handle=str(raw["handle"]), pid=int(raw["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def parent_of(pid: int) -> int | None:
    """A process's parent, from ``/proc`` (None where there is none to read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold anything
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def ancestors(pid: int) -> list[int]:
    """``pid``'s parents, nearest first, up to (not including) init."""
    found: list[int] = []
    current: int | None = pid
    while current is not None and len(found) < MAX_DEPTH:
        current = parent_of(current)
        if current is None or current <= 1 or current in found:
            break
        found.append(current)
    return found


def local_agent(*folders: Path, pid: int | None = None) -> LocalAgent | None:
    """The agent whose Warp the nearest of this process's parents started, if it runs, as
    noted in the first of ``folders`` (the project folder, and where else it may be) that
    holds a note of that parent: the parents are walked once."""
    for parent in ancestors(os.getpid() if pid is None else pid):
        for folder in dict.fromkeys(folders):
            note = read_note(note_path(folder, parent))
            if note is not None and pid_alive(note.pid):
                return note
    return None
