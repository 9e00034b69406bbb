"""``shuttle dlq list|retry|discard``: work that ran out of attempts."""

from __future__ import annotations

from typing import Annotated

import typer

from loom import refs
from loom.transport import seg
from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, command_group, out, state
from shuttle.listing import fetch, more_hint
from shuttle.output import ago, emit_json, escape, say, short, styled, table

app = command_group(help="The dead-letter queue: list, retry or discard items.", no_args_is_help=True)

WorkIdArg = Annotated[
    str, typer.Argument(help="Work item: its id, a unique start of it, or its task id.", show_default=False)
]


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    limit: LimitOpt = 50,
    cursor: CursorOpt = None,
    all_pages: AllOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Dead-lettered items with their last error."""
    o = out(ctx, json_out, quiet)
    result = fetch(state(ctx).client(), "/api/dlq", {}, limit=limit, cursor=cursor, follow=all_pages)
    if o.json:
        emit_json(result)
        return
    if o.quiet:
        for entry in result["items"]:
            typer.echo(_item(entry).get("id", ""))
        return
    table(
        "dead letters",
        ["id", "task", "capability", "tries", "last error", "dead since"],
        [
            (
                escape(w.get("id", "")),
                escape(short(w.get("task_id"), 24)),
                escape(w.get("capability", "-")),
                w.get("attempts", "-"),
                escape(short(w.get("error"), 60)),
                ago(entry.get("dead_lettered_at") or w.get("updated_at")),
            )
            for entry in result["items"]
            for w in [_item(entry)]
        ],
        empty="the dead-letter queue is empty",
        flex=4,
        drop=(2, 3, 1),
    )
    hint = more_hint(result)
    if hint:
        say(hint)


def _item(entry: dict[str, object]) -> dict[str, object]:
    """A DLQ entry is either the work item or ``{"item": {...}, "dead_lettered_at": ...}``."""
    inner = entry.get("item")
    return inner if isinstance(inner, dict) else entry


@app.command("retry")
def retry_cmd(
    ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Put a dead-lettered item back in its queue with fresh attempts."""
    client = state(ctx).client()
    item = client.post(f"/api/dlq/{seg(refs.work_id(client, work_id))}/retry")
    o = out(ctx, json_out, quiet)
    if o.json:
        emit_json(item)
    elif o.quiet:
        typer.echo(item.get("id", ""))
    else:
        say(f"{escape(item.get('id', work_id))} {styled(item.get('status'))}")


@app.command("discard")
def discard_cmd(
    ctx: typer.Context, work_id: WorkIdArg, json_out: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Drop a dead-lettered item for good (its record stays, marked discarded)."""
    client = state(ctx).client()
    work_id = refs.work_id(client, work_id)
    result = client.delete(f"/api/dlq/{seg(work_id)}")
    o = out(ctx, json_out, quiet)
    if o.json:
        emit_json(result if result is not None else {"discarded": work_id})
    elif o.quiet:
        typer.echo(work_id)
    else:
        say(f"discarded {escape(work_id)}")
