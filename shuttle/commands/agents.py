"""``shuttle agents list|show|shutdown``: the agent registry as Weft sees it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, out, state
from shuttle.batch import report
from shuttle.client import seg
from shuttle.listing import fetch, more_hint
from shuttle.output import console, emit_json, escape, say, styled
from shuttle.views import agent_fields, agent_table

app = typer.Typer(help="List, inspect and shut down agents.", no_args_is_help=True)

AGENT_STATUSES = ["online", "busy", "offline"]


def _status(value: str | None) -> str | None:
    if value is not None and value not in AGENT_STATUSES:
        raise typer.BadParameter(f"must be one of {', '.join(AGENT_STATUSES)}")
    return value


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    agent_type: Annotated[str | None, typer.Option("--type", "-t", help="Agent type.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", "-s", callback=_status, help="online, busy or offline.")
    ] = None,
    capability: Annotated[str | None, typer.Option("--capability", "-c")] = None,
    boundary: Annotated[str | None, typer.Option("--boundary", "-b")] = None,
    limit: LimitOpt = 50,
    cursor: CursorOpt = None,
    all_pages: AllOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Registered agents, filtered by type, status, capability or boundary."""
    o = out(ctx, json_out, quiet)
    result = fetch(
        state(ctx).client(),
        "/api/agents",
        {"type": agent_type, "status": status, "capability": capability, "boundary": boundary},
        limit=limit,
        cursor=cursor,
        follow=all_pages,
    )
    if o.json:
        emit_json(result)
    elif o.quiet:
        for agent in result["items"]:
            typer.echo(agent.get("agent_id", ""))
    else:
        console().print(agent_table(result["items"]))
        hint = more_hint(result)
        if hint:
            say(hint)


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(help="Agent id (32 hex).", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """One agent's registry entry."""
    agent = state(ctx).client().get(f"/api/agents/{seg(agent_id)}")
    if out(ctx, json_out).json:
        emit_json(agent)
    else:
        agent_fields(agent)


@app.command("shutdown")
def shutdown_cmd(
    ctx: typer.Context,
    agent_ids: Annotated[list[str], typer.Argument(help="One or more agent ids.", show_default=False)],
    reason: Annotated[str, typer.Option("--reason", help="Told to the agent.")] = "",
    grace: Annotated[
        float | None, typer.Option("--grace", min=0, max=3600, help="Seconds to drain before exiting.")
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Ask agents to drain, deregister and exit (several ids use the batch route)."""
    o = out(ctx, json_out, quiet)
    client = state(ctx).client()
    body: dict[str, Any] = {}
    if reason:
        body["reason"] = reason
    if grace is not None:
        body["grace_s"] = grace
    if len(agent_ids) > 1:
        report(
            client.post("/api/agents/shutdown-batch", {"agent_ids": agent_ids, **body}),
            o,
            "asked to shut down",
        )
        return
    result = client.post(f"/api/agents/{seg(agent_ids[0])}/shutdown", body)
    if o.json:
        emit_json(result)
    elif o.quiet:
        typer.echo(result.get("agent_id", ""))
    else:
        say(f"{escape(result.get('agent_id', ''))} asked to shut down ({styled(result.get('status'))})")
