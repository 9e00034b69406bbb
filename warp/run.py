"""``loom-run``: start an agent CLI for one item *in* that item's worktree
(docs/workstreams.md, "Made before the agent starts").

A spin-up target's command is ``loom-run -- <agent CLI ...>``. Weft starts it on the
agent's host with the item in ``LOOM_WORK_ID`` (docs/spinup.md); before the CLI starts,
``loom-run`` makes the item's branch and worktree exactly as the claim would, then
replaces itself with the CLI, started in that worktree (same process: the mechanism's
handle, signals and exit code are the CLI's). The CLI's Warp takes the worktree up when
it claims the item; if it claims another, that item gets its own as usual and the
prepared one is the sweep's.

Fail closed, as at a claim: when the worktree cannot be made, or the fabric cannot be
asked whether one is needed, the CLI is not started at all (exit 3, the reason on
stderr), so nothing ever runs in the main checkout instead; the item stays queued. With
no item (a manual start), no repository, or an item that is not a worker's to start, the
CLI starts where it was asked to, unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from shared.errors import Unavailable, describe_validation

if TYPE_CHECKING:
    from shared.identity import Identity
    from shared.settings import NatsSettings

PROG: Final = "loom-run"
EXIT_USAGE: Final = 2
EXIT_NO_WORKSTREAM: Final = 3
EXIT_NOT_FOUND: Final = 127


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Start an agent CLI for one work item inside the item's own worktree "
        "(docs/workstreams.md). Use it as a spin-up target's command: loom-run -- claude ...",
        epilog="Configuration comes from the environment a spin-up gives every agent: NATS_URL, "
        "LOOM_PROJECT_ID, LOOM_AGENT_ID, LOOM_WORK_ID, ... (docs/spinup.md).",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="the agent CLI and its arguments, after --")
    return p


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = [part for part in args.command]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        _say("command: required (loom-run -- <agent CLI> [arguments])")
        return EXIT_USAGE
    if shutil.which(command[0]) is None:  # before anything is made for it
        _say("command: not found or not executable (give a path, or a program on PATH)")
        return EXIT_NOT_FOUND

    from pydantic import ValidationError

    from shared.identity import IdentityError, bound_to_credential, load_settings, resolve_identity
    from shared.names import InvalidNameError, is_work_id
    from shared.nats.auth import CredentialsError, agent_credential
    from shared.redact import redact
    from shared.settings import NatsSettings, SettingsError
    from warp.settings import load_warp_settings

    try:
        work_id = load_warp_settings().work_id
        if work_id is None:
            return _start(command, dict(os.environ), None, None)  # a manual start: nothing to prepare
        if not is_work_id(work_id):
            _say("LOOM_WORK_ID: must be a work id (32 lowercase hex)")
            return EXIT_USAGE
        nats_settings = NatsSettings()
        identity = resolve_identity(bound_to_credential(load_settings(), agent_credential(nats_settings)))
    except (IdentityError, SettingsError, InvalidNameError, CredentialsError) as exc:
        _say(str(exc))
        return EXIT_USAGE
    except ValidationError as exc:
        _say(redact(describe_validation(exc.errors(include_url=False))))
        return EXIT_USAGE
    try:
        directory = asyncio.run(_prepare(identity, nats_settings, work_id))
    except _NoWorkstream as exc:
        _say(f"{exc}; the agent was not started, nothing ran in the main checkout")
        return EXIT_NO_WORKSTREAM
    return _start(command, dict(os.environ), directory, identity)


class _NoWorkstream(Unavailable):
    """The item needs a worktree and it could not be made (or not be known to be unneeded)."""


async def _prepare(identity: Identity, nats_settings: NatsSettings, work_id: str) -> Path | None:
    """The item's worktree, made for this agent; None when it works without one."""
    from shared.errors import LoomError
    from shared.git.repository import RepositoryStore
    from shared.git.workstream import WorkstreamError
    from shared.models import WorkStatus
    from shared.names import ProjectNames
    from shared.nats.client import connect
    from shared.redact import redact
    from shared.work.moves import WorkRecord
    from warp.workstreams import host_workstreams

    names = ProjectNames(identity.project_id)
    try:
        nc = await connect(nats_settings, name=f"{PROG} {identity.handle}", timeout=10.0)
    except (LoomError, OSError) as exc:
        raise _NoWorkstream(f"NATS: {redact(str(exc))}") from None
    try:
        js = nc.jetstream()
        repository = await RepositoryStore(js, names).get()
        if repository is None or not repository.enabled:
            return None
        try:
            entry = await (await js.key_value(names.work_records_bucket)).get(work_id)
        except Exception:  # not found, or no bucket yet: no item to prepare for
            _say(f"work {work_id} not found; starting without a worktree")
            return None
        if entry.value is None:
            return None
        item = WorkRecord.model_validate_json(entry.value).item
        if not item.isolated or item.status is not WorkStatus.QUEUED:
            return None  # opted out, or not a worker's claim to come (a review makes its own)
        try:
            place = await host_workstreams(identity, repository).prepare(item, agent_id=identity.agent_id)
        except WorkstreamError as exc:
            raise _NoWorkstream(exc.message) from None
        return place.directory
    finally:
        await nc.close()


def _start(command: list[str], env: dict[str, str], directory: Path | None, identity: Identity | None) -> int:
    """Replace this process with the agent CLI (given ``env``, this process's environment):
    in the worktree when there is one, with the project folder kept as the agent's
    (``LOOM_PROJECT_PATH``) so its Warp finds the same worktree root and identity there."""
    if directory is not None and identity is not None:
        env["LOOM_PROJECT_PATH"] = str(identity.project_path)
        env["LOOM_WORKTREE"] = str(directory)
        os.chdir(directory)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        _say(f"command: cannot be started ({exc.strerror or 'not found'})")
    return EXIT_NOT_FOUND  # reached only when the exec failed


if __name__ == "__main__":
    sys.exit(main())
