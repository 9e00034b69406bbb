"""``shuttle work list|show|graph|trace|cancel|retry|checkpoints|restore|diff``: work items in the project."""

from __future__ import annotations

from typing import Annotated

import typer

from loom import refs
from loom.transport import seg
from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, command_group, out, state
from shuttle.batch import report
from shuttle.listing import fetch, more_hint
from shuttle.output import console, emit_json, escape, say, styled, table
from shuttle.views import graph_tree, trace_waterfall, work_fields, work_table

app = command_group(help="List, inspect, graph, cancel and retry work items.", no_args_is_help=True)

STATUSES = [
    "submitted",
    "queued",
    "blocked",
    "claimed",
    "in-progress",
    "waiting-on-operator",
    "in-review",
    "reviewing",
    "landing",
    "merging",
    "completed",
    "failed",
    "cancelled",
    "expired",
    "dead-lettered",
]


def _status(value: str | None) -> str | None:
    if value is not None and value not in STATUSES:
        raise typer.BadParameter(f"must be one of {', '.join(STATUSES)}")
    return value


WorkIdArg = Annotated[
    str, typer.Argument(help="Work item: its id, a unique start of it, or its task id.", show_default=False)
]


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option("--status", "-s", callback=_status, help=f"One of: {', '.join(STATUSES)}.")
    ] = None,
    capability: Annotated[str | None, typer.Option("--capability", "-c")] = None,
    boundary: Annotated[str | None, typer.Option("--boundary", "-b")] = None,
    assigned_to: Annotated[str | None, typer.Option("--assigned-to", help="Agent id.")] = None,
    limit: LimitOpt = 50,
    cursor: CursorOpt = None,
    all_pages: AllOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Work items, newest first, filtered by status, capability, boundary or agent; the
    bottlenecks among them (docs/operator.md) are named under the table."""
    o = out(ctx, json_out, quiet)
    result = fetch(
        state(ctx).client(),
        "/api/work",
        {"status": status, "capability": capability, "boundary": boundary, "assigned_to": assigned_to},
        limit=limit,
        cursor=cursor,
        follow=all_pages,
    )
    if o.json:
        emit_json(result)
    elif o.quiet:
        for item in result["items"]:
            typer.echo(item.get("id", ""))
    else:
        console().print(work_table(result["items"]))
        listed = {item.get("id") for item in result["items"]}
        found = state(ctx).client().get("/api/work/bottlenecks")
        for entry in found.get("items", []):
            item = entry.get("item", {})
            if item.get("id") in listed:
                say(
                    f"bottleneck: {escape(item['id'])} ({escape(item.get('task_id') or '-')}) "
                    f"holds up {entry.get('held_up')} open items"
                )
        hint = more_hint(result)
        if hint:
            say(hint)


@app.command("show")
def show_cmd(ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False) -> None:
    """One work item with its progress, result and error history."""
    client = state(ctx).client()
    item = client.get(f"/api/work/{seg(refs.work_id(client, work_id))}")
    if out(ctx, json_out).json:
        emit_json(item)
    else:
        work_fields(item)


@app.command("graph")
def graph_cmd(ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False) -> None:
    """What the item depends on and what depends on it, as a tree with each item's state."""
    client = state(ctx).client()
    graph = client.get(f"/api/work/{seg(refs.work_id(client, work_id))}/graph")
    if out(ctx, json_out).json:
        emit_json(graph)
    else:
        console().print(graph_tree(graph))


@app.command("trace")
def trace_cmd(ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False) -> None:
    """The item's timeline as a waterfall: each process's spans for it (Weft, the agent's Warp,
    spin-ups) and its transitions, from what Weft recorded (no collector needed)."""
    client = state(ctx).client()
    timeline = client.get(f"/api/work/{seg(refs.work_id(client, work_id))}/trace")
    if out(ctx, json_out).json:
        emit_json(timeline)
    else:
        console().print(trace_waterfall(timeline))


@app.command("cancel")
def cancel_cmd(
    ctx: typer.Context,
    work_ids: Annotated[
        list[str],
        typer.Argument(
            help="One or more work items (ids, unique starts of ids, task ids).", show_default=False
        ),
    ],
    reason: Annotated[str, typer.Option("--reason", help="Recorded with the cancellation.")] = "",
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Cancel queued, claimed or in-progress work (several ids use the batch route)."""
    o = out(ctx, json_out, quiet)
    client = state(ctx).client()
    body = {"reason": reason} if reason else {}
    work_ids = [refs.work_id(client, ref) for ref in work_ids]
    if len(work_ids) > 1:
        report(client.post("/api/work/cancel-batch", {"work_ids": work_ids, **body}), o, "cancelled")
        return
    item = client.post(f"/api/work/{seg(work_ids[0])}/cancel", body)
    if o.json:
        emit_json(item)
    elif o.quiet:
        typer.echo(item.get("id", ""))
    else:
        say(f"{escape(item.get('id', ''))} {styled(item.get('status'))}")


@app.command("retry")
def retry_cmd(
    ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Queue a failed or dead-lettered item again (attempts start over)."""
    o = out(ctx, json_out, quiet)
    client = state(ctx).client()
    item = client.post(f"/api/work/{seg(refs.work_id(client, work_id))}/retry")
    if o.json:
        emit_json(item)
    elif o.quiet:
        typer.echo(item.get("id", ""))
    else:
        say(f"{escape(item.get('id', ''))} {styled(item.get('status'))}")


@app.command("checkpoints")
def checkpoints_cmd(ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False) -> None:
    """The item's checkpoints (snapshots of its worktree), newest first, and the one its
    next attempt starts from (docs/workstreams.md)."""
    client = state(ctx).client()
    listed = client.get(f"/api/work/{seg(refs.work_id(client, work_id))}/checkpoints")
    if out(ctx, json_out).json:
        emit_json(listed)
        return
    chosen = listed.get("resume_from")
    rows = [
        (
            ("* " if c.get("sha") == chosen else "  ") + str(c.get("sha", ""))[:12],
            c.get("at", ""),
            c.get("attempt", ""),
            str(c.get("agent_id", ""))[:12],
            c.get("files", ""),
        )
        for c in listed.get("checkpoints", [])
    ]
    branch = escape(str(listed.get("branch") or "-"))
    table(
        f"checkpoints of {escape(str(listed.get('work_id', '')))} on {branch}",
        ["checkpoint", "at", "attempt", "agent", "files"],
        rows,
        empty="no checkpoints (the item has no workstream yet)",
        flex=None,
    )
    if chosen:
        say(f"* the next attempt starts from {escape(str(chosen)[:12])}")


@app.command("restore")
def restore_cmd(
    ctx: typer.Context,
    work_id: WorkIdArg,
    checkpoint: Annotated[str, typer.Argument(help="A checkpoint SHA or a unique prefix of one.")],
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Start the item's next attempt from this checkpoint: its files, uncommitted."""
    o = out(ctx, json_out, quiet)
    client = state(ctx).client()
    listed = client.post(
        f"/api/work/{seg(refs.work_id(client, work_id))}/restore", {"checkpoint": checkpoint}
    )
    if o.json:
        emit_json(listed)
    else:
        say(f"next attempt starts from {escape(str(listed.get('resume_from', ''))[:12])}", quiet=o.quiet)


@app.command("diff")
def diff_cmd(
    ctx: typer.Context,
    work_id: WorkIdArg,
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", help="One of its checkpoints (a SHA or a prefix of one).")
    ] = None,
    stat: Annotated[
        bool, typer.Option("--stat", help="Only the files changed, with + and - counts.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """What the item's code changed from its base: its handed-in head, its newest checkpoint
    or its branch (docs/workstreams.md)."""
    client = state(ctx).client()
    found = client.get(f"/api/work/{seg(refs.work_id(client, work_id))}/diff", checkpoint=checkpoint)
    if out(ctx, json_out).json:
        emit_json(found)
        return
    head, base = str(found.get("head_sha", ""))[:12], str(found.get("base_sha", ""))[:12]
    say(f"{escape(str(found.get('branch', '')))}: {escape(base)}..{escape(head)}")
    for change in found.get("files", []):
        plus, minus = change.get("insertions"), change.get("deletions")
        counts = "binary" if plus is None else f"+{plus} -{minus}"
        typer.echo(f"  {change.get('status', '?')} {change.get('path', '')}  {counts}")
    if not stat:
        typer.echo(found.get("diff", ""), nl=False)
        if found.get("truncated"):
            say("(the diff was cut at 1 MB; the file list above is whole)")
