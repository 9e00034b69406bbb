"""``shuttle context list|show``: context trees (docs/context.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from loom.transport import seg
from shuttle.app import CursorOpt, JsonOpt, LimitOpt, QuietOpt, command_group, out, state
from shuttle.listing import fetch, more_hint
from shuttle.output import console, emit_json, escape, say

app = command_group(
    help="Browse context trees: work items' histories, threads, shared notes.", no_args_is_help=True
)

SNIPPET = 160
PAGE = 500


def _label(node: dict[str, Any]) -> str:
    """One line for a node: kind, author, when, and the start of its content."""
    text = " ".join(str(node.get("text") or "").split())
    if len(text) > SNIPPET:
        text = text[: SNIPPET - 1] + "…"
    handle = node.get("handle") or {}
    source = handle.get("source")
    where = (
        "" if source in (None, "inline") else f" [dim]<{escape(source)}:{escape(handle.get('id', ''))}>[/dim]"
    )
    who = (node.get("meta") or {}).get("handle") or str(node.get("author", ""))[:8]
    at = str(node.get("at", ""))[:19].replace("T", " ")
    updated = " [yellow](updated)[/yellow]" if node.get("supersedes") else ""
    return (
        f"[bold]{escape(node.get('kind', ''))}[/bold] {escape(who)} [dim]{escape(at)}[/dim]{updated}{where}"
        + (f": {escape(text)}" if text else "")
    )


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    tree_id: Annotated[
        str, typer.Argument(help="Tree id (a work item's tree has the work id).", show_default=False)
    ],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100_000, help="Nodes to show at most.")
    ] = 2000,
    json_out: JsonOpt = False,
) -> None:
    """A tree drawn as a tree: each node under its parent, in the order it was added."""
    from rich.tree import Tree

    client = state(ctx).client()
    tree = client.get(f"/api/contexts/{seg(tree_id)}")
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(items) < limit:
        page = client.get(
            f"/api/contexts/{seg(tree_id)}/nodes", limit=min(PAGE, limit - len(items)), cursor=cursor
        )
        items.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    if out(ctx, json_out).json:
        emit_json({"tree": tree, "nodes": items, "next_cursor": cursor})
        return
    meta = tree.get("meta") or {}
    title = f"[bold]{escape(meta.get('title') or tree_id)}[/bold] [dim]({escape(meta.get('kind', 'tree'))}, "
    title += f"{tree.get('nodes', 0)} nodes, id {escape(tree_id)})[/dim]"
    root = Tree(title)
    stack: list[Tree] = [root]
    for item in items:
        depth = int(item.get("depth", 0))
        del stack[depth + 1 :]
        branch = stack[-1].add(_label(item["node"]))
        stack.append(branch)
    console().print(root)
    if cursor:
        say(f"[dim]… more nodes: shuttle context show {escape(tree_id)} --limit {limit * 2}[/dim]")


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option("--kind", "-k", help="tree, thread or dm-thread.")] = None,
    channel: Annotated[str | None, typer.Option("--channel", help="Threads of this channel.")] = None,
    limit: LimitOpt = 50,
    cursor: CursorOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Listed trees, newest first (threads and created trees; a work item's tree is its id)."""
    o = out(ctx, json_out, quiet)
    result = fetch(
        state(ctx).client(),
        "/api/contexts",
        {"kind": kind, "channel": channel},
        limit=limit,
        cursor=cursor,
        follow=False,
    )
    if o.json:
        emit_json(result)
        return
    if o.quiet:
        for entry in result["items"]:
            typer.echo(entry.get("tree_id", ""))
        return
    from rich.table import Table

    table = Table(show_header=True, header_style="bold")
    for column in ("TREE", "KIND", "TITLE", "CREATED BY", "CREATED"):
        table.add_column(column)
    for entry in result["items"]:
        table.add_row(
            escape(entry.get("tree_id", "")),
            escape(entry.get("kind", "")),
            escape(entry.get("title", "")),
            escape(str(entry.get("created_by", ""))[:12]),
            escape(str(entry.get("created_at", ""))[:19].replace("T", " ")),
        )
    console().print(table)
    hint = more_hint(result)
    if hint:
        say(hint)
