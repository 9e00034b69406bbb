"""``shuttle context list|show|export|import|delete|restore``: context trees (docs/context.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from loom.transport import seg
from shared.errors import parse_problem
from shuttle.app import CursorOpt, JsonOpt, LimitOpt, QuietOpt, command_group, out, state
from shuttle.errors import UsageError
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


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    tree_id: Annotated[str, typer.Argument(help="Tree id.", show_default=False)],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the document here (default: stdout).")
    ] = None,
) -> None:
    """A tree as one JSON document (every version and tombstone), for `shuttle context import`."""
    document = state(ctx).client().get(f"/api/contexts/{seg(tree_id)}/export")
    text = json.dumps(document, ensure_ascii=False, indent=1)
    for warning in document.get("warnings") or []:
        typer.echo(f"shuttle: warning: {warning}", err=True)
    if output is None:
        typer.echo(text)
        return
    try:
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--output: cannot write the file ({exc.strerror})") from None
    say(f"Wrote {len(document.get('nodes') or [])} nodes of tree {escape(tree_id)} to {escape(str(output))}")


@app.command("import")
def import_cmd(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="A document from `shuttle context export`.", show_default=False)
    ],
    json_out: JsonOpt = False,
) -> None:
    """Import an exported tree as a tree of this project (importing it again adds nothing)."""
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"file: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"file: {parse_problem(exc)}") from None
    done = state(ctx).client().post("/api/contexts/import", document)
    if out(ctx, json_out).json:
        emit_json(done)
        return
    for warning in done.get("warnings") or []:
        typer.echo(f"shuttle: warning: {warning}", err=True)
    tree = done["tree"]
    say(
        f"Imported tree {escape(tree['tree_id'])}: {escape((tree.get('meta') or {}).get('title', ''))} "
        f"({done['imported']} nodes stored, {tree.get('nodes', 0)} in the tree)"
    )


@app.command("delete")
def delete_cmd(
    ctx: typer.Context,
    tree_id: Annotated[str, typer.Argument(help="Tree id.", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """Schedule a tree's deletion: it takes no more writes and is purged after Weft's window
    (WEFT_CONTEXT_DELETION_WINDOW_S) unless restored before."""
    tree = state(ctx).client().delete(f"/api/contexts/{seg(tree_id)}")
    if out(ctx, json_out).json:
        emit_json(tree)
        return
    due = str((tree.get("deleting") or {}).get("purge_after", ""))[:19].replace("T", " ")
    say(f"Tree {escape(tree_id)} is scheduled for deletion: purged after {escape(due)} UTC.")
    say(f"[dim]Undo before then: shuttle context restore {escape(tree_id)}[/dim]")


@app.command("restore")
def restore_cmd(
    ctx: typer.Context,
    tree_id: Annotated[str, typer.Argument(help="Tree id.", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """Undo a tree's scheduled deletion (before it is purged)."""
    tree = state(ctx).client().post(f"/api/contexts/{seg(tree_id)}/restore")
    if out(ctx, json_out).json:
        emit_json(tree)
        return
    say(f"Tree {escape(tree_id)} is restored.")
