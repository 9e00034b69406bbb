"""``shuttle agents list|protocol|show|shutdown|credentials|revoke``: the agent registry as Weft
sees it, the agent protocol's other agents, and NATS credentials for agents attached by hand."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from loom import refs
from loom.transport import seg
from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, command_group, out, state
from shuttle.batch import report
from shuttle.listing import fetch, more_hint
from shuttle.output import console, emit_json, escape, say, styled
from shuttle.views import agent_fields, agent_table, protocol_agent_table

app = command_group(
    help="List, inspect and shut down agents; mint their NATS credentials.", no_args_is_help=True
)


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


@app.command("protocol")
def protocol_cmd(ctx: typer.Context, json_out: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """Agents of Synadia's Agent Protocol on Weft's NATS account that are not Loom's."""
    o = out(ctx, json_out, quiet)
    found = state(ctx).client().get("/api/agents/protocol")
    if o.json:
        emit_json(found)
    elif o.quiet:
        for agent in found["items"]:
            typer.echo(agent.get("prompt_subject", ""))
    else:
        console().print(protocol_agent_table(found["items"]))


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    agent_id: Annotated[
        str, typer.Argument(help="Agent: its id, a unique start of it, or its handle.", show_default=False)
    ],
    json_out: JsonOpt = False,
) -> None:
    """One agent's registry entry."""
    client = state(ctx).client()
    agent = client.get(f"/api/agents/{seg(refs.agent_id(client, agent_id))}")
    if out(ctx, json_out).json:
        emit_json(agent)
    else:
        agent_fields(agent)


@app.command("shutdown")
def shutdown_cmd(
    ctx: typer.Context,
    agent_ids: Annotated[
        list[str],
        typer.Argument(help="One or more agents (ids, unique starts of ids, handles).", show_default=False),
    ],
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
    agent_ids = [refs.agent_id(client, ref) for ref in agent_ids]
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


@app.command("credentials")
def credentials_cmd(
    ctx: typer.Context,
    output: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the creds file (created with mode 0600).")
    ],
    agent_id: Annotated[
        str | None, typer.Option("--agent-id", help="The agent's id (32 hex); default: a new one.")
    ] = None,
    channel: Annotated[
        list[str] | None, typer.Option("--channel", help="A channel besides the built-in and existing ones.")
    ] = None,
    ttl: Annotated[
        float | None, typer.Option("--ttl", min=60, help="Lifetime in seconds (default: Weft's).")
    ] = None,
    user_id: Annotated[
        str | None,
        typer.Option("--user-id", help="The agent's user (16 hex, see warp_handle_get); default: its own."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Mint NATS credentials for a hand-attached agent (Weft with scoped NATS auth; admin token).

    The creds file is written, never printed; then run Warp with NATS_CREDS pointing at it."""
    if output.exists():
        raise typer.BadParameter("already exists; remove it or choose another path", param_hint="--out")
    body: dict[str, Any] = {"user_id": user_id} if user_id else {}
    if agent_id:
        body["agent_id"] = agent_id
    if channel:
        body["channels"] = channel
    if ttl is not None:
        body["ttl_s"] = ttl
    minted = state(ctx).client().post("/api/agents/credentials", body)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as creds:
        creds.write(str(minted.pop("creds", "")))
    env = {**minted.get("env", {}), "NATS_CREDS": str(output.resolve())}
    if out(ctx, json_out).json:
        emit_json({**minted, "creds_file": str(output.resolve()), "env": env})
        return
    say(
        f"credentials for agent {escape(minted.get('agent_id', ''))} written to {escape(str(output))} "
        f"(expire {escape(str(minted.get('expires_at', '')))}; revoke: shuttle agents revoke "
        f"{escape(minted.get('user_key', ''))})"
    )
    for name, value in env.items():
        typer.echo(f"{name}={shlex.quote(str(value))}")


@app.command("revoke")
def revoke_cmd(
    ctx: typer.Context,
    user_key: Annotated[str, typer.Argument(help="The credentials' public key (U...).", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """Revoke NATS credentials: the servers refuse them and close their connections now."""
    result = state(ctx).client().delete(f"/api/agents/credentials/{seg(user_key)}")
    if out(ctx, json_out).json:
        emit_json(result)
    else:
        say(f"{escape(user_key)} revoked")
