"""``shuttle project pause|resume|status``: an operator stops new claims and spin-ups in a
project, and lets them go on again (docs/operations.md, Pause)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shuttle.app import JsonOpt, QuietOpt, command_group, out, state
from shuttle.output import emit_json, say

app = command_group(help="Pause and resume the project: no new claims or spin-ups while paused.")


def _said(body: dict[str, Any]) -> str:
    pause = body.get("paused")
    project = body.get("project_id", "")
    if not pause:
        return f"{project} is not paused: claims and spin-ups are admitted"
    why = f": {pause['reason']}" if pause.get("reason") else ""
    running = "; running items stop at their next checkpoint" if pause.get("stop_running") else ""
    return (
        f"{project} is paused by {pause['by']} since {pause['at']}{why} (no new claims or spin-ups{running})"
    )


def _show(ctx: typer.Context, body: dict[str, Any], json_out: bool, quiet: bool) -> None:
    o = out(ctx, json_out, quiet)
    if o.json:
        emit_json(body)
    elif not o.quiet:
        say(_said(body))


@app.command("status")
def status_cmd(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Whether the project is paused, by whom, why and since when (GET /api/pause)."""
    body = state(ctx).client().get("/api/pause")
    if out(ctx, json_out).json:
        emit_json(body)
    else:
        say(_said(body))


@app.command("pause")
def pause_cmd(
    ctx: typer.Context,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (agents are told).")] = "",
    by: Annotated[str, typer.Option("--by", help="Who pauses it (a handle).")] = "operator",
    stop_running: Annotated[
        bool,
        typer.Option(
            "--stop-running", help="Held items stop too: handed back to the queue at their next checkpoint."
        ),
    ] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Pause the project (operate): no new claims or spin-ups; held items go on, or with
    --stop-running stop at their next checkpoint (PUT /api/pause)."""
    body = {"reason": reason, "by": by, "stop_running": stop_running}
    _show(ctx, state(ctx).client().put("/api/pause", body), json_out, quiet)


@app.command("resume")
def resume_cmd(ctx: typer.Context, json_out: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """Resume the project (operate): claims and spin-ups are admitted again (DELETE /api/pause)."""
    _show(ctx, state(ctx).client().delete("/api/pause"), json_out, quiet)
