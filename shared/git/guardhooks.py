"""loom-guard as a repository's git hooks (docs/leases.md, Git): where they go, whose they
are, installing them. One copy for ``shuttle leases install-hook`` and the agent hosts'
session-start hook (docs/hosts.md), which installs them only where a repository has none."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Final

HOOKS: Final = ("pre-commit", "pre-push")
MARK: Final = "# loom-guard hook (shuttle leases install-hook)"


def hooks_dir(repo: Path) -> Path | None:
    """The repository's hooks folder (git's ``core.hooksPath`` honoured); None outside one."""
    done = subprocess.run(
        ["git", "rev-parse", "--git-path", "hooks"], cwd=repo, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return None
    hooks = Path(done.stdout.strip())
    return hooks if hooks.is_absolute() else (repo / hooks)


def guard_command() -> str | None:
    """The installed ``loom-guard`` next to this Python (so the hook works outside the
    venv), else on PATH; None when it is not installed."""
    beside = Path(sys.executable).parent / "loom-guard"
    if beside.exists():
        return str(beside)
    return shutil.which("loom-guard")


def _ours(path: Path) -> bool:
    return MARK in path.read_text(errors="replace")


def foreign_hooks(hooks: Path) -> list[str]:
    """The pre-commit / pre-push hooks installed that are not loom-guard's."""
    return [h for h in HOOKS if (hooks / h).exists() and not _ours(hooks / h)]


def installed(hooks: Path) -> bool:
    return all((hooks / h).exists() and _ours(hooks / h) for h in HOOKS)


def install(hooks: Path, command: str) -> None:
    """Write both hooks (replacing what is there: the caller checked :func:`foreign_hooks`)."""
    hooks.mkdir(parents=True, exist_ok=True)
    for hook in HOOKS:
        target = hooks / hook
        target.write_text(f'#!/bin/sh\n{MARK}\nexec "{command}" {hook} "$@"\n')
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
