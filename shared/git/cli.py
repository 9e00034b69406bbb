"""The one way Loom runs ``git``: the real CLI, arguments as a list, never a shell.

Workstreams (docs/workstreams.md) need worktrees, private refs, temporary indexes and
pushes to any remote git speaks to; the CLI covers all of them as git's authors intend,
and the agent's host already has it. Every call is non-interactive (no prompt for a
password can hang an agent) and its failure is one :class:`GitFailed` whose message says
which step failed and what git said, with credentials masked.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from shared.errors import LoomError
from shared.redact import redact

GIT_FAILED: Final = "git_failed"
GIT_TIMEOUT_S: Final = 120.0
"""A fetch or push over a slow network may take a while; nothing local comes near."""

_QUIET_ENV: Final = {
    "GIT_TERMINAL_PROMPT": "0",  # never ask for a password: fail instead
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GCM_INTERACTIVE": "never",
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",  # git's messages in one language, so they can be read by the code
}
_SSH_BATCH: Final = "ssh -o BatchMode=yes"
"""ssh without prompts (host keys, passwords), unless the host says how to run ssh."""


class GitFailed(LoomError):
    """A git step failed: ``step`` names it (e.g. ``fetch``), the message carries git's words."""

    code = GIT_FAILED

    def __init__(self, step: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.step = step


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str


def said(result: GitResult) -> str:
    """git's own reason, one line: the last line that says something (hints dropped),
    credentials masked."""
    lines = [
        line.strip()
        for line in (result.stderr or result.stdout).splitlines()
        if line.strip() and not line.lstrip().startswith("hint:")
    ]
    return redact(lines[-1]) if lines else "no reason given"


async def git(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    stdin: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
    step: str | None = None,
    fsync: bool = True,
) -> GitResult:
    """Run ``git args...``; raise :class:`GitFailed` on a non-zero exit when ``check``.

    ``fsync=False`` for what can be made again or is pushed right after (Loom's own copy
    of a repository, its worktrees, checkpoints): git's fsyncs cost 0.5-1.5 s per
    worktree on a virtual disk, for no durability the repository does not already give."""
    full_env = {**os.environ, **_QUIET_ENV, **(env or {})}
    if "GIT_SSH_COMMAND" not in full_env and "GIT_SSH" not in full_env:
        full_env["GIT_SSH_COMMAND"] = _SSH_BATCH
    name = step or (args[0] if args else "git")
    options = () if fsync else ("-c", "core.fsync=none")
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *options,
            *args,
            cwd=cwd,
            env=full_env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise GitFailed(name, "git is not installed on this host (or not on PATH)") from None
    except ValueError:  # an argument with a NUL byte: no program can be given it
        raise GitFailed(name, f"git {name}: an argument holds a character no command line can") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise GitFailed(name, f"git {name}: no answer within {timeout:g} s") from None
    result = GitResult(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))
    if check and result.returncode != 0:
        raise GitFailed(name, f"git {name} failed: {said(result)}")
    return result


async def out(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    step: str | None = None,
    fsync: bool = True,
) -> str:
    """The stripped standard output of a git command that must succeed."""
    return (await git(*args, cwd=cwd, env=env, step=step, fsync=fsync)).stdout.strip()


async def branch_name_ok(name: str) -> bool:
    """Whether git itself accepts ``name`` as a branch name (``check-ref-format --branch``)."""
    if not name or name.startswith("-"):
        return False
    return (await git("check-ref-format", "--branch", name, check=False)).returncode == 0


def commit_env(name: str, email: str) -> dict[str, str]:
    """Author and committer of a commit Loom makes (a checkpoint, the rest of a hand-in):
    set here so a host with no git identity configured can still commit."""
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
