"""``loom-guard``: the git hook that makes file leases hold (docs/leases.md, Git).

Installed as ``pre-commit`` and ``pre-push`` by ``shuttle leases install-hook``. It asks
Weft which leases stand in the way of the paths changed (``GET /api/leases?path=``) and
refuses a commit (or a push) that touches a path another agent holds an *exclusive* lease
on, naming the holder and the work. The committing agent's own leases pass: it says who
it is with ``LOOM_AGENT_ID`` (an agent id or handle; or ``git config loom.agent``).
``LOOM_LEASE_OVERRIDE="why"`` lets a refused commit through, and the override is written
to ``$GIT_DIR/loom-guard.log`` and to standard error. Weft unreachable: the commit goes
through with a warning, or is refused when ``LOOM_GUARD_STRICT=1``.

It stays small on purpose (the standard library's HTTP client and Shuttle's settings),
and Weft's lease index decides which paths are in the way: a hook runs on every commit,
so its start-up is its cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from shared.agents.local import local_agent
from shared.errors import LoomError, Unavailable
from shared.leases.patterns import exact_path

EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2
ZERO_SHA: Final = "0" * 40
OVERRIDE_ENV: Final = "LOOM_LEASE_OVERRIDE"
AGENT_ENV: Final = "LOOM_AGENT_ID"
STRICT_ENV: Final = "LOOM_GUARD_STRICT"
LOG_NAME: Final = "loom-guard.log"
GIT_ERROR: Final = "git_error"


class GuardError(Unavailable):
    """The guard could not ask Weft (unreachable, a refused request, an answer it cannot read):
    the commit goes through with a warning unless ``LOOM_GUARD_STRICT=1``."""


class GitError(LoomError):
    """git could not say what the commit or push changes (no repository, a commit it does not
    have): the guard cannot decide, whether Weft is there or not (a usage error)."""

    code = GIT_ERROR


@dataclass(frozen=True)
class Blocked:
    path: str
    lease: dict[str, Any]
    pattern: str

    def describe(self) -> str:
        lease = self.lease
        holder = lease.get("holder_handle") or lease.get("holder", "?")
        work = f", work {lease['work_id']}" if lease.get("work_id") else ""
        reason = f" ({lease['reason']})" if lease.get("reason") else ""
        return (
            f"  {self.path}: leased exclusively by {holder} ({lease.get('holder', '?')}{work}) "
            f"as {self.pattern} until {lease.get('expires_at', '?')}{reason} [lease {lease.get('id', '?')}]"
        )


# -- what the commit or push changes ------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {done.stderr.strip()[:300]}")
    return done.stdout


def _names(raw: str) -> list[str]:
    return [p for p in raw.split("\0") if p]


def staged_paths(repo: Path) -> list[str]:
    """Paths the commit being made adds, changes or removes (both sides of a rename)."""
    return _names(_git(repo, "diff", "--cached", "--name-only", "--no-renames", "-z"))


def pushed_paths(repo: Path, updates: Iterable[str]) -> list[str]:
    """Paths changed by the commits a push sends (git's pre-push lines on standard input:
    ``<local ref> <local sha> <remote ref> <remote sha>``)."""
    found: dict[str, None] = {}
    for line in updates:
        parts = line.split()
        if len(parts) != 4 or parts[1] == ZERO_SHA:
            continue  # malformed, or a branch deletion (changes no file)
        local, remote = parts[1], parts[3]
        if remote == ZERO_SHA:
            raw = _git(
                repo, "log", "--no-renames", "--name-only", "-z", "--format=", local, "--not", "--remotes"
            )
        else:
            raw = _git(repo, "diff", "--name-only", "--no-renames", "-z", remote, local)
        for path in _names(raw):
            found.setdefault(path.strip("\n"), None)
    return [p for p in found if p]


# -- the leases ------------------------------------------------------------------------------------


BATCH: Final = 16
"""Paths asked about per request (Weft's limit on ``path`` parameters, ``MAX_PATHS``)."""


def _get(
    url: str, token: str | None, project: str | None, timeout: float, query: list[tuple[str, str]]
) -> Any:
    request = urllib.request.Request(f"{url.rstrip('/')}/api/leases?{urllib.parse.urlencode(query)}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if project:
        request.add_header("X-Loom-Project", project)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise GuardError(f"Weft refused the lease check (HTTP {exc.code})") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise GuardError(f"cannot reach Weft for the lease check ({type(reason).__name__})") from None


def in_the_way(
    paths: Sequence[str], url: str, token: str | None, project: str | None, timeout: float
) -> list[tuple[str, dict[str, Any], str]]:
    """(path, lease, its pattern) for each path under an exclusive lease, as Weft's index
    decides (``GET /api/leases?path=...&mode=shared``: only exclusive leases stand in the
    way of a shared request). Each path is asked about as itself, exactly."""
    found: list[tuple[str, dict[str, Any], str]] = []
    for start in range(0, len(paths), BATCH):
        chunk = list(paths[start : start + BATCH])
        exact = {exact_path(p): p for p in chunk}
        body = _get(url, token, project, timeout, [("mode", "shared"), *(("path", e) for e in exact)])
        if not isinstance(body, dict) or not isinstance(body.get("conflicts"), list):
            raise GuardError("Weft's lease check has no conflicts list")
        leases = {lease.get("id"): lease for lease in body.get("items", []) if isinstance(lease, dict)}
        for clash in body["conflicts"]:
            if not isinstance(clash, dict):
                continue
            lease = leases.get(clash.get("lease_id")) or {**clash, "id": clash.get("lease_id")}
            path = exact.get(str(clash.get("requested")), str(clash.get("path", "?")))
            found.append((path, lease, str(clash.get("pattern", "?"))))
    return found


def is_mine(lease: dict[str, Any], me: str | None) -> bool:
    return bool(me) and me in (lease.get("holder"), lease.get("holder_handle"))


def blocked(clashes: Sequence[tuple[str, dict[str, Any], str]], me: str | None) -> list[Blocked]:
    """The clashes with live exclusive leases of other agents, one per path."""
    now = datetime.now(UTC)
    found: dict[str, Blocked] = {}
    for path, lease, pattern in clashes:
        if lease.get("mode") == "exclusive" and not is_mine(lease, me) and _until(lease) > now:
            found.setdefault(path, Blocked(path, lease, pattern))
    return list(found.values())


def _until(lease: dict[str, Any]) -> datetime:
    try:
        return datetime.fromisoformat(str(lease.get("expires_at")))
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)  # unreadable: counted as live (the safe side)


def who_am_i(repo: Path) -> str | None:
    """The committing agent: ``LOOM_AGENT_ID``; else the Warp of the agent host this commit
    runs under (it notes itself: shared/agents/local.py), so a session's own leases pass
    without configuration; else ``git config loom.agent``."""
    me = os.environ.get(AGENT_ENV, "").strip()
    if me:
        return me
    project = os.environ.get("LOOM_PROJECT_PATH", "").strip()
    found = local_agent(*([Path(project)] if project else []), repo, *repo.parents)
    if found is not None:
        return found.agent_id
    done = subprocess.run(
        ["git", "config", "--get", "loom.agent"], cwd=repo, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None


def log_override(repo: Path, hook: str, me: str | None, why: str, refused: Sequence[Blocked]) -> Path:
    git_dir = Path(_git(repo, "rev-parse", "--absolute-git-dir").strip())
    path = git_dir / LOG_NAME
    entry = {
        "at": datetime.now(UTC).isoformat(),
        "hook": hook,
        "agent": me,
        "reason": why,
        "paths": [b.path for b in refused],
        "leases": sorted({str(b.lease.get("id")) for b in refused}),
    }
    with path.open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
    return path


# -- the hook --------------------------------------------------------------------------------------


def run(hook: str, repo: Path, stdin_lines: Iterable[str] = ()) -> int:
    from shuttle.config import resolve
    from shuttle.errors import UsageError

    try:
        settings = resolve()
    except UsageError as exc:
        print(f"loom-guard: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    try:
        paths = staged_paths(repo) if hook == "pre-commit" else pushed_paths(repo, stdin_lines)
    except GitError as exc:
        print(f"loom-guard: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not paths:
        return 0
    try:
        clashes = in_the_way(
            paths, settings.api_url, settings.api_token, settings.project_id, min(settings.timeout, 10)
        )
    except GuardError as exc:
        if os.environ.get(STRICT_ENV) == "1":
            print(f"loom-guard: {exc}; refusing ({STRICT_ENV}=1)", file=sys.stderr)
            return EXIT_REFUSED
        print(f"loom-guard: warning: {exc}; leases not checked", file=sys.stderr)
        return 0
    me = who_am_i(repo)
    refused = blocked(clashes, me)
    if not refused:
        return 0
    action = "commit" if hook == "pre-commit" else "push"
    lines = [f"loom-guard: {action} refused: {len(refused)} path(s) leased by other agents:"]
    lines += [b.describe() for b in refused]
    why = os.environ.get(OVERRIDE_ENV, "").strip()
    if why:
        logged = log_override(repo, hook, me, why, refused)
        lines[0] = (
            f"loom-guard: OVERRIDE ({OVERRIDE_ENV}): {action} allowed despite {len(refused)} leased path(s):"
        )
        print("\n".join([*lines, f"  logged in {logged}"]), file=sys.stderr)
        return 0
    lines.append(
        f"Ask the holder (warp_messages_send_direct), wait for the lease to end, or set {AGENT_ENV} "
        f"if the lease is yours; {OVERRIDE_ENV}='why' overrides (logged)."
    )
    print("\n".join(lines), file=sys.stderr)
    return EXIT_REFUSED


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("pre-commit", "pre-push"):
        print("usage: loom-guard pre-commit | pre-push [git's hook arguments]", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    try:
        top = _git(Path.cwd(), "rev-parse", "--show-toplevel").strip()
    except GitError as exc:
        print(f"loom-guard: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    lines = sys.stdin.read().splitlines() if args[0] == "pre-push" else []
    raise SystemExit(run(args[0], Path(top), lines))
