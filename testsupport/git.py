"""Real git repositories for tests: a bare origin with a first commit on ``main``, and
clones of it standing in for agents' hosts. Synchronous: set-up, not the code under test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

AUTHOR = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def run_git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, **AUTHOR, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def make_origin(parent: Path, files: dict[str, str] | None = None, *, name: str = "origin.git") -> Path:
    """A bare repository whose ``main`` holds ``files`` (a README by default)."""
    origin = parent.resolve() / name
    seed = parent.resolve() / f"{name}-seed"
    run_git("init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    run_git("init", "--quiet", "--initial-branch=main", str(seed))
    for rel, text in (files or {"README.md": "hello\n"}).items():
        path = seed / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    run_git("add", "--all", cwd=seed)
    run_git("commit", "--quiet", "-m", "first", cwd=seed)
    run_git("push", "--quiet", str(origin), "main", cwd=seed)
    return origin


def clone(origin: Path, dest: Path) -> Path:
    """A host's checkout of the origin (the agent's project folder)."""
    run_git("clone", "--quiet", str(origin), str(dest))
    return dest


def tree_state(checkout: Path) -> tuple[str, ...]:
    """HEAD, branch, status, refs and worktrees of a checkout: unchanged means untouched
    (Loom's own folder under it is ignored, so ``status`` does not list it)."""
    return (
        run_git("rev-parse", "HEAD", cwd=checkout),
        run_git("symbolic-ref", "--short", "HEAD", cwd=checkout),
        run_git("status", "--porcelain", "--untracked-files=all", cwd=checkout),
        run_git("for-each-ref", cwd=checkout),
        run_git("worktree", "list", "--porcelain", cwd=checkout),
        run_git("diff", "--cached", cwd=checkout),
    )


def remote_sha(origin: Path, ref: str) -> str | None:
    out = run_git("ls-remote", str(origin), ref)
    return out.split()[0] if out else None
