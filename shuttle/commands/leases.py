"""``shuttle leases``: who holds which files, for how long and for which work; ending a
lease as an operator; installing the git hook that enforces them (docs/leases.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from loom import refs
from loom.transport import seg
from shared.git.guardhooks import HOOKS, foreign_hooks, guard_command, hooks_dir, install
from shuttle.app import JsonOpt, QuietOpt, command_group, out, state
from shuttle.errors import UsageError
from shuttle.output import ago, emit_json, escape, say, short, table

app = command_group(help="File leases: list them, end one, install the git hook that enforces them.")


@app.callback(invoke_without_command=True)
def leases_cmd(
    ctx: typer.Context,
    holder: Annotated[
        str | None,
        typer.Option(
            "--holder", help="Only this agent's leases (its id, a unique start of it, or its handle)."
        ),
    ] = None,
    work_id: Annotated[
        str | None,
        typer.Option("--work-id", help="Only leases serving this work item (id, start of it, task id)."),
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option("--path", "-p", help="Only leases in the way of this path (repeatable)."),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Live leases: who holds what, how long for, and for which work."""
    if ctx.invoked_subcommand is not None:
        return
    o = out(ctx, json_out, quiet)
    client = state(ctx).client()
    params: dict[str, object] = {
        "holder": None if holder is None else refs.agent_id(client, holder, "holder"),
        "work_id": None if work_id is None else refs.work_id(client, work_id),
    }
    if path:
        params["path"] = path
    result = client.request("GET", "/api/leases", params=params)
    if o.json:
        emit_json(result)
        return
    if o.quiet:
        for lease in result["items"]:
            typer.echo(lease.get("id", ""))
        return
    table(
        "leases",
        ["id", "holder", "mode", "patterns", "work", "token", "expires", "reason"],
        [
            (
                escape(lease.get("id", "")),
                escape(lease.get("holder_handle") or short(lease.get("holder"), 8)),
                escape(lease.get("mode", "")),
                escape(", ".join(lease.get("patterns") or [])),
                escape(lease.get("work_id") or "-"),
                lease.get("token", "-"),
                ago(lease.get("expires_at")),
                escape(short(lease.get("reason") or "-", 40)),
            )
            for lease in result["items"]
        ],
        empty="nothing in the way of those paths" if path else "no leases",
        flex=3,
        drop=(7, 5, 4),
    )


@app.command("release")
def release_cmd(
    ctx: typer.Context,
    lease_id: Annotated[str, typer.Argument(help="Lease id.", show_default=False)],
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """End a lease whoever holds it (an operator's decision; needs an operate token)."""
    o = out(ctx, json_out, quiet)
    ended = state(ctx).client().delete(f"/api/leases/{seg(lease_id)}")
    if o.json:
        emit_json(ended)
    elif o.quiet:
        typer.echo(ended.get("id", ""))
    else:
        holder = ended.get("holder_handle") or ended.get("holder", "")
        say(f"released {escape(ended.get('id', ''))} (held by {escape(holder)})")


@app.command("install-hook")
def install_hook_cmd(
    repo: Annotated[Path, typer.Option("--repo", help="The repository (default: the current one).")] = Path(
        "."
    ),
    force: Annotated[bool, typer.Option("--force", help="Replace hooks that are not loom-guard's.")] = False,
) -> None:
    """Install loom-guard as the repository's pre-commit and pre-push hooks: a commit that
    touches paths another agent leased exclusively is refused, naming the holder."""
    if not repo.is_dir():
        raise UsageError("--repo: not a directory")
    hooks = hooks_dir(repo.resolve())
    if hooks is None:
        raise UsageError("--repo: not inside a git repository")
    command = guard_command()
    if command is None:
        raise UsageError("loom-guard: not installed next to shuttle (pip install loom-fabric)")
    foreign = foreign_hooks(hooks)
    if foreign and not force:
        raise UsageError(f"{foreign[0]}: a hook that is not loom-guard's is installed; --force replaces it")
    install(hooks, command)
    say(f"installed loom-guard as {', '.join(HOOKS)} in {escape(str(hooks))}")
    if not os.environ.get("LOOM_AGENT_ID"):
        say("agents committing here set LOOM_AGENT_ID (their id or handle) so their own leases pass")
