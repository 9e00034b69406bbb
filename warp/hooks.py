"""``loom-hook``: the agent host's hooks (docs/hosts.md), Claude Code's protocol: one JSON
object on standard input, the answer as the exit code, standard output and standard error.

* ``session-start``: what the session's agent should know first, on standard output (the
  host adds it to the agent's context): who it is, the work assigned to it, how many
  direct messages wait in its inbox; and loom-guard installed as the repository's git
  hooks when it has none (docs/leases.md, Git). Never blocks: the fabric out of reach is
  said in one line.
* ``pre-edit``: before an edit or write tool changes a file, the path is checked against
  the project's leases; an *exclusive* lease of another agent refuses the edit (exit 2,
  the reason on standard error, which the host shows the agent): the holder, its work and
  branch, until when. The session's own leases pass (the agent is found as its Warp noted
  itself: shared/agents/local.py). Leases out of reach let the edit through with a warning,
  or refuse it with ``LOOM_GUARD_STRICT=1``.

The hooks read the same environment as the session's Warp (``NATS_URL``,
``LOOM_PROJECT_ID``, ...): one configuration for the agent and its hooks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from shared.errors import Invalid, describe_validation

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient

    from shared.identity import Identity
    from shared.models import Lease
    from shared.settings import IdentitySettings, NatsSettings

PROG: Final = "loom-hook"
EXIT_OK: Final = 0
EXIT_BLOCK: Final = 2
"""Claude Code's "blocking error": the tool call is refused and standard error goes to the agent."""
EXIT_USAGE: Final = 1
"""Any other non-zero exit: the host goes on and shows the error to the person."""
CONNECT_S: Final = 3.0
EDIT_PATH_KEYS: Final = ("file_path", "notebook_path", "path")
SHOWN_ITEMS: Final = 5
STRICT_ENV: Final = "LOOM_GUARD_STRICT"


class HookInputError(Invalid):
    """The host's JSON is not what the hook protocol says (names the field)."""


@dataclass(frozen=True)
class HookConfig:
    """What the hooks read of the environment, read once by :func:`main` (the edge): the
    session's Warp settings (the same variables) and the guard's strictness."""

    identity: IdentitySettings
    nats: NatsSettings
    strict: bool = False


def read_input(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        raise HookInputError("stdin: must be one JSON object (the host's hook input)") from None
    if not isinstance(data, dict):
        raise HookInputError("stdin: must be one JSON object (the host's hook input)")
    return data


def _session_dir(data: dict[str, Any]) -> Path:
    cwd = data.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise HookInputError("cwd: must be a string (the session's working directory)")
    return Path(cwd) if cwd else Path.cwd()


def edited_path(data: dict[str, Any]) -> Path | None:
    """The file an edit or write tool is about to change (Claude Code: ``file_path`` for
    Write/Edit/MultiEdit, ``notebook_path`` for NotebookEdit), absolute; None for a tool
    that names none."""
    tool_input = data.get("tool_input")
    if tool_input is None:
        return None
    if not isinstance(tool_input, dict):
        raise HookInputError("tool_input: must be an object")
    for key in EDIT_PATH_KEYS:
        value = tool_input.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise HookInputError(f"tool_input.{key}: must be a non-empty path")
        path = Path(value).expanduser()
        return path if path.is_absolute() else _session_dir(data) / path
    return None


def repository_root(path: Path) -> Path | None:
    """The top of the git worktree holding ``path`` (the nearest folder that exists is
    asked: a file being created may be in a folder not made yet)."""
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    done = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True, check=False
    )
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def lease_path(path: Path, session: Path) -> str | None:
    """``path`` as leases name it: relative to its repository's top (a workstream's
    worktree, or the checkout), else to the session's folder; None when outside both."""
    resolved = path.resolve()
    for root in (repository_root(resolved), session.resolve()):
        if root is not None and resolved.is_relative_to(root) and resolved != root:
            return resolved.relative_to(root).as_posix()
    return None


# -- who the session's agent is ---------------------------------------------------------------


def session_identity(session: Path, config: HookConfig) -> Identity:
    """The session's agent as its Warp is: the settings both read, the Warp its host
    started when it noted itself (several sessions in one folder each find their own),
    else the id the settings give."""
    from shared.agents.local import local_agent
    from shared.identity import resolve_identity

    identity = resolve_identity(config.identity, cwd=session)
    found = local_agent(identity.project_path, session, *session.parents)
    return identity if found is None else replace(identity, agent_id=found.agent_id, handle=found.handle)


async def _connect(nats_settings: NatsSettings, handle: str) -> NatsClient:
    from shared.nats.client import connect

    return await connect(nats_settings, name=f"{PROG} {handle}", timeout=CONNECT_S)


# -- session-start -------------------------------------------------------------------------------


async def session_brief(identity: Identity, nats_settings: NatsSettings) -> str:
    """What the agent should know first: who it is, its work, its inbox."""
    from nats.js.errors import BucketNotFoundError

    from shared.models import FINAL_WORK_STATES
    from shared.names import ProjectNames
    from shared.nats.jetstream import snapshot
    from shared.work.moves import WorkFilter, WorkRecord
    from warp.messages import InboxService

    names = ProjectNames(identity.project_id)
    nc = await _connect(nats_settings, identity.handle)
    try:
        js = nc.jetstream()
        try:
            bucket = await js.key_value(names.work_records_bucket)
            # only this agent's records are parsed, not the project's thousands
            values = await snapshot(bucket, where=WorkFilter(assigned_to=identity.agent_id).may_match)
        except BucketNotFoundError:  # no work in the project yet
            values = {}
        items = (WorkRecord.model_validate_json(raw).item for raw in values.values())
        mine = [i for i in items if i.assigned_to == identity.agent_id and i.status not in FINAL_WORK_STATES]
        waiting = await InboxService(nc, js, names).waiting(identity.agent_id)
    finally:
        await nc.close()
    mine.sort(key=lambda i: i.created_at)
    lines = [f"Loom: you are agent {identity.handle} ({identity.agent_id}) in project {identity.project_id}."]
    if mine:
        lines.append(f"Assigned to you: {len(mine)} item(s).")
        for item in mine[:SHOWN_ITEMS]:
            first = item.description.strip().splitlines()[0][:100] if item.description.strip() else ""
            where = f" in {item.workstream.branch}" if item.workstream is not None else ""
            lines.append(f"- {item.id} [{item.status.value}] {item.task_id}: {first}{where}")
        if len(mine) > SHOWN_ITEMS:
            lines.append(f"- ... and {len(mine) - SHOWN_ITEMS} more (warp_work_list)")
        lines.append("Carry on with them (warp_work_context for an item's hand-off) before claiming more.")
    else:
        lines.append("Nothing is assigned to you: take work with warp_work_claim.")
    if waiting:
        lines.append(
            f"Your inbox: {waiting} direct message(s) waiting: read them with warp_messages_read_direct."
        )
    return "\n".join(lines)


def install_git_guard(session: Path) -> str | None:
    """loom-guard as the repository's pre-commit and pre-push hooks, where the repository
    has none of either (never replacing another tool's); what was done, or None."""
    from shared.git.guardhooks import foreign_hooks, guard_command, hooks_dir, install, installed

    hooks = hooks_dir(session)
    command = guard_command()
    if hooks is None or command is None or installed(hooks) or foreign_hooks(hooks):
        return None
    install(hooks, command)
    return f"Loom: installed loom-guard as this repository's git hooks ({hooks})."


def session_start(data: dict[str, Any], config: HookConfig) -> tuple[int, str, str]:
    session = _session_dir(data)
    said: list[str] = []
    try:
        said.append(asyncio.run(session_brief(session_identity(session, config), config.nats)))
    except Exception as exc:
        from shared.redact import redact

        said.append(
            f"Loom: the fabric is out of reach now ({redact(_reason(exc))}); the tools say when it is back."
        )
    guard = install_git_guard(session)
    if guard:
        said.append(guard)
    return EXIT_OK, "\n".join(said) + "\n", ""


# -- pre-edit ------------------------------------------------------------------------------------


async def edit_clashes(identity: Identity, nats_settings: NatsSettings, path: str) -> list[str]:
    """Other agents' exclusive leases on ``path``, described."""
    from shared.leases.book import LeaseBook
    from shared.leases.patterns import exact_path
    from shared.models import LeaseMode
    from shared.names import ProjectNames

    nc = await _connect(nats_settings, identity.handle)
    book = LeaseBook(nc, ProjectNames(identity.project_id))
    try:
        clashes = await book.conflicting([exact_path(path)], holder=identity.agent_id, mode=LeaseMode.SHARED)
    finally:
        await book.stop()
        await nc.close()
    return [_refusal(path, clash.lease) for clash in clashes]


def _refusal(path: str, lease: Lease) -> str:
    from shared.leases.book import held_by

    reason = f" ({lease.reason})" if lease.reason else ""
    return (
        f"{path} is leased exclusively by {held_by(lease)} until {lease.expires_at.isoformat()}{reason} "
        f"[lease {lease.id}]"
    )


def pre_edit(data: dict[str, Any], config: HookConfig) -> tuple[int, str, str]:
    session = _session_dir(data)
    target = edited_path(data)
    if target is None:
        return EXIT_OK, "", ""
    path = lease_path(target, session)
    if path is None:
        return EXIT_OK, "", ""  # outside the project: no lease can name it
    try:
        refused = asyncio.run(edit_clashes(session_identity(session, config), config.nats, path))
    except Exception as exc:
        from shared.redact import redact

        why = f"Loom: leases could not be checked ({redact(_reason(exc))})"
        if config.strict:
            return EXIT_BLOCK, "", f"{why}; the edit is refused ({STRICT_ENV}=1).\n"
        return EXIT_OK, "", f"{why}; the edit goes ahead.\n"
    if not refused:
        return EXIT_OK, "", ""
    advice = (
        "Do not change it now: ask the holder (warp_messages_send_direct), work on something else, "
        "or wait until the lease ends (warp_lease_list)."
    )
    return EXIT_BLOCK, "", "Loom refused this edit: " + "; ".join(refused) + f". {advice}\n"


def _reason(exc: BaseException) -> str:
    from shared.errors import LoomError

    if isinstance(exc, LoomError):
        return exc.message
    return type(exc).__name__


HOOKS = {"session-start": session_start, "pre-edit": pre_edit}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Loom's hooks for agent hosts (Claude Code's hook protocol; docs/hosts.md).",
    )
    p.add_argument("hook", choices=sorted(HOOKS), help="which hook the host runs")
    args = p.parse_args(argv)
    from pydantic import ValidationError

    from shared.errors import LoomError
    from shared.identity import bound_to_credential, load_settings
    from shared.nats.auth import agent_credential
    from shared.redact import configure_logging, redact
    from shared.settings import NatsSettings, load

    configure_logging(os.environ.get("LOOM_LOG_LEVEL", "WARNING"))
    try:
        nats_settings = load(NatsSettings)
        identity = bound_to_credential(load_settings(), agent_credential(nats_settings))
        strict = os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")
        config = HookConfig(identity=identity, nats=nats_settings, strict=strict)
        data = read_input(sys.stdin.read())
        code, out, err = HOOKS[args.hook](data, config)
    except LoomError as exc:  # bad input or settings: named, never blocking
        print(f"{PROG}: {redact(exc.message)}", file=sys.stderr)
        return EXIT_USAGE
    except ValidationError as exc:
        print(f"{PROG}: " + redact(describe_validation(exc.errors(include_url=False))), file=sys.stderr)
        return EXIT_USAGE
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main())
