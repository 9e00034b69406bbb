"""Which agent a hook works for (shared.agents.local): the note Warp leaves under its host's
process id, found by walking a process's parents; a note of a dead Warp is no one's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.agents.local import (
    LocalAgent,
    ancestors,
    note_path,
    read_note,
    remove_note,
    write_note,
)

A = "a" * 32
B = "b" * 32


def test_a_process_sees_its_parents_nearest_first() -> None:
    found = ancestors(os.getpid())
    assert found and found[0] == os.getppid() and 1 not in found


def found_by_a_child(project: Path) -> subprocess.CompletedProcess[str]:
    """What a child of this process (a hook of this "host") finds for ``project``."""
    code = f"from shared.agents.local import local_agent; print(local_agent({str(project)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def test_a_child_finds_the_note_its_parent_left_and_not_a_dead_one(tmp_path: Path) -> None:
    path = write_note(tmp_path, LocalAgent(A, "alpha", os.getpid()), host_pid=os.getpid())
    assert path == note_path(tmp_path, os.getpid()) and read_note(path) == LocalAgent(A, "alpha", os.getpid())
    assert (tmp_path / ".loom" / "agents" / ".gitignore").read_text() == "*\n"  # never part of the tree
    child = found_by_a_child(tmp_path)
    assert f"agent_id='{A}'" in child.stdout  # the child's parent is this process

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    write_note(tmp_path, LocalAgent(B, "beta", int(dead.stdout)), host_pid=os.getpid())
    child = found_by_a_child(tmp_path)
    assert child.stdout.strip() == "None"  # its Warp is gone


def test_a_stopping_warp_removes_only_its_own_note(tmp_path: Path) -> None:
    path = write_note(tmp_path, LocalAgent(A, "alpha", os.getpid()), host_pid=12345)
    remove_note(path, B)  # another Warp replaced nothing here: not B's note
    assert path is not None and path.exists()
    remove_note(path, A)
    assert not path.exists()
    assert read_note(path) is None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert read_note(path) is None


def test_an_unwritable_project_leaves_no_note_and_no_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert write_note(blocked, LocalAgent(A, "alpha", os.getpid())) is None
