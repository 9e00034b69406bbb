"""warp_context_*: context trees (docs/context.md). Thin adapters over shared.context.store.

A tree another agent may not read (a direct-message thread it is not part of) answers
as if it did not exist; nodes whose scope hides their content from this agent are
shown without it (listed in ``withheld``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from shared.context.reads import TreeView
from shared.context.trees import MAX_TEXT, ContextHandle, TreeMeta, node_input
from shared.mcp.tools import tool
from shared.models import Scope
from shared.names import TOKEN_PATTERN, anchored
from warp.runtime import WarpRuntime
from warp.schemas import (
    AsOf,
    AsOfSeq,
    ContextChangeOut,
    ContextChangesOut,
    ContextHandlesOut,
    ContextLeavesOut,
    ContextListOut,
    ContextNodeDetailOut,
    ContextNodeOut,
    ContextPathOut,
    ContextResolveOut,
    ContextStructureOut,
    ContextTreeOut,
    Cursor,
    Metadata,
    NodeId,
    NodeRefOut,
    ResolvedOut,
    ThreadOut,
    TreeId,
)
from warp.tools.base import result

if TYPE_CHECKING:
    from shared.channels import Viewer
    from shared.context.trees import ContextNode, TreeState
    from warp.services import Services

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description="The node's own content")]
Kind = Annotated[str, Field(pattern=anchored(TOKEN_PATTERN), description="What the node is: note, plan, ...")]


def _line(node: ContextNode, depth: int = 0) -> str:
    text = " ".join((node.text or "").split())[:160]
    where = "" if node.handle.source == "inline" else f" <{node.handle.source}:{node.handle.id}>"
    return f"{'  ' * depth}- {node.id} [{node.kind}] {node.author[:8]}{where}: {text}"


def _viewer(svc: Services) -> Viewer:
    from shared.channels import Viewer

    return Viewer(agent_id=svc.agent_id, user_id=svc.identity.user_id)


async def _readable_tree(svc: Services, tree_id: str) -> TreeState:
    from shared.context.trees import may_read_tree, tree_missing

    state = await svc.contexts.existing(tree_id)
    if not may_read_tree(state.meta, svc.agent_id):
        raise tree_missing()
    return state


def _own_node(svc: Services, state: TreeState, node_id: str, doing: str) -> ContextNode:
    """The node, if this agent wrote it: an agent changes only its own nodes (Weft, the
    operator's view, may change any)."""
    from shared.errors import Forbidden

    first = state.find(node_id)
    if state.nodes[first].author != svc.agent_id:
        raise Forbidden(f"only its author may {doing} it", field="node_id")
    return state.latest(first)


def _shown(svc: Services, nodes: list[ContextNode]) -> tuple[list[ContextNode], list[str]]:
    from shared.context.trees import readable

    out: list[ContextNode] = []
    withheld: list[str] = []
    for node in nodes:
        if readable(node, agent_id=svc.agent_id, user_id=svc.identity.user_id):
            out.append(node)
        else:
            withheld.append(node.id)
            out.append(node.model_copy(update={"text": None, "meta": {}}))
    return out, withheld


async def warp_context_create(
    rt: WarpRuntime,
    title: Annotated[str, Field(min_length=1, max_length=200, description="What the tree is about")],
    text: Annotated[Text | None, Field(description="The root's content")] = None,
    handle: Annotated[ContextHandle | None, Field(description="Where the root's content lives")] = None,
    metadata: Metadata | None = None,
) -> Annotated[CallToolResult, ContextTreeOut]:
    """Start a context tree (a shared, durable record of what was tried, said and decided).
    Its root holds text or a handle to data elsewhere; append nodes under any node."""
    svc = await rt.services()
    given = node_input(parent_id="0" * 32, text=text, handle=handle or ContextHandle(), meta=metadata or {})
    svc.tree_rate.admit()
    state, root, _ = await svc.contexts.create_tree(
        TreeMeta(kind="tree", title=title),
        author=svc.agent_id,
        author_user=svc.identity.user_id,
        handle=given.handle,
        text=given.text,
        root_meta=given.meta,
    )
    out = ContextTreeOut(tree_id=state.tree_id, meta=state.meta, root=root)
    return result(out, f"Created tree {state.tree_id}: {title}\n{_line(root)}")


async def warp_context_append(
    rt: WarpRuntime,
    tree_id: TreeId,
    parent_id: Annotated[NodeId, Field(description="Append under this node (a second child is a branch)")],
    text: Text | None = None,
    handle: Annotated[ContextHandle | None, Field(description="Where the content lives")] = None,
    kind: Kind = "note",
    role: Annotated[str | None, Field(pattern=anchored(TOKEN_PATTERN))] = None,
    metadata: Metadata | None = None,
    scope: Annotated[Scope, Field(description="Who may read its content")] = Scope.TEAM,
) -> Annotated[CallToolResult, ContextNodeOut]:
    """Append a node under any node of a tree (a work item's tree has the work id as its id)."""
    svc = await rt.services()
    await _readable_tree(svc, tree_id)
    given = node_input(
        parent_id=parent_id,
        text=text,
        handle=handle or ContextHandle(),
        kind=kind,
        role=role,
        meta=metadata or {},
        scope=scope,
    )
    node = await svc.contexts.append(tree_id, given, author=svc.agent_id, author_user=svc.identity.user_id)
    return result(ContextNodeOut(tree_id=tree_id, node=node), f"Appended.\n{_line(node)}")


async def warp_context_update(
    rt: WarpRuntime,
    tree_id: TreeId,
    node_id: Annotated[NodeId, Field(description="The node's newest version")],
    text: Text | None = None,
    handle: Annotated[ContextHandle | None, Field(description="Where the content lives")] = None,
    metadata: Metadata | None = None,
) -> Annotated[CallToolResult, ContextNodeOut]:
    """Update a node you wrote: a new node supersedes it in place (children stay); the old one
    stays stored."""
    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    newest = _own_node(svc, state, node_id, "update")
    given = node_input(
        parent_id=newest.parent_id or "0" * 32,
        text=text if text is not None else newest.text,
        handle=handle or newest.handle,
        kind=newest.kind,
        role=newest.role,
        meta=metadata if metadata is not None else newest.meta,
        scope=newest.scope,
    )
    node = await svc.contexts.update(
        tree_id, node_id, given, author=svc.agent_id, author_user=svc.identity.user_id
    )
    return result(ContextNodeOut(tree_id=tree_id, node=node), f"Updated.\n{_line(node)}")


async def warp_context_tombstone(
    rt: WarpRuntime,
    tree_id: TreeId,
    node_id: NodeId,
    reason: Annotated[str, Field(max_length=2000)] = "",
) -> Annotated[CallToolResult, ContextNodeOut]:
    """Hide a node you wrote and its subtree from reads (the history stays stored)."""
    svc = await rt.services()
    _own_node(svc, await _readable_tree(svc, tree_id), node_id, "tombstone")
    node = await svc.contexts.tombstone(
        tree_id, node_id, author=svc.agent_id, author_user=svc.identity.user_id, reason=reason
    )
    return result(ContextNodeOut(tree_id=tree_id, node=node), f"Tombstoned {node_id}.")


async def warp_context_path(
    rt: WarpRuntime,
    tree_id: TreeId,
    node_id: NodeId,
    include_hidden: Annotated[bool, Field(description="Also inside a tombstoned subtree")] = False,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, ContextPathOut]:
    """The context of a node: the path from the root to it, each node in its newest version
    (or, with as_of_seq / as_of, in the version it had then)."""
    from shared.context.trees import upto_of

    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    upto = upto_of(state, as_of_seq, as_of)
    nodes, withheld = _shown(svc, state.path_at(node_id, upto, include_hidden=include_hidden))
    out = ContextPathOut(tree_id=tree_id, nodes=nodes, withheld=withheld)
    return result(out, "\n".join(_line(n, i) for i, n in enumerate(nodes)))


async def warp_context_structure(
    rt: WarpRuntime,
    tree_id: TreeId,
    node_id: Annotated[NodeId | None, Field(description="Start here (default: the root)")] = None,
    depth: Annotated[int | None, Field(ge=0, le=10_000, description="Levels below the start")] = None,
    limit: Annotated[int, Field(ge=1, le=10_000)] = 500,
    cursor: Cursor | None = None,
    include_hidden: bool = False,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, ContextStructureOut]:
    """A tree's shape without content: ids, kinds, authors, child counts (navigate cheaply);
    with as_of_seq / as_of, as it stood then."""
    from shared.context.reads import structure
    from shared.context.trees import upto_of

    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    upto = upto_of(state, as_of_seq, as_of)
    refs, following = structure(
        state, node_id, max_depth=depth, limit=limit, cursor=cursor, include_hidden=include_hidden, upto=upto
    )
    out = ContextStructureOut(tree_id=tree_id, nodes=[NodeRefOut.of(r) for r in refs], next_cursor=following)
    lines = [f"{'  ' * r.depth}- {r.id} [{r.kind}] {r.author[:8]} ({r.children} children)" for r in refs]
    if following:
        lines.append(f"More: next_cursor {following}")
    return result(out, "\n".join(lines))


async def warp_context_resolve(
    rt: WarpRuntime,
    tree_id: TreeId,
    node_ids: Annotated[list[NodeId], Field(min_length=1, max_length=50)],
) -> Annotated[CallToolResult, ContextResolveOut]:
    """The content behind nodes' handles, in one call, for sources Loom holds (inline text,
    work items, channel and direct messages, other trees' nodes)."""
    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    done = await svc.contexts.resolve(state, node_ids, _viewer(svc))
    items = [ResolvedOut.model_validate(vars(r)) for r in done]
    lines = [
        f"{r.node_id}: {'resolved' if r.resolved else 'not resolved (' + (r.reason or '') + ')'}"
        for r in items
    ]
    return result(ContextResolveOut(tree_id=tree_id, items=items), "\n".join(lines))


async def warp_context_changes(
    rt: WarpRuntime,
    tree_id: Annotated[
        TreeId | None, Field(description="One tree (default: every tree of the project)")
    ] = None,
    cursor: Annotated[Cursor | None, Field(description="next_cursor of the previous call")] = None,
    limit: Annotated[int, Field(ge=1, le=500)] = 100,
) -> Annotated[CallToolResult, ContextChangesOut]:
    """What was added since a cursor (oldest first); without one, from the beginning."""
    from shared.context.trees import may_read_tree

    svc = await rt.services()
    if tree_id is not None:
        await _readable_tree(svc, tree_id)
    changes, following = await svc.contexts.changes(tree_id, cursor=cursor, limit=limit)
    kept: list[ContextChangeOut] = []
    withheld = 0
    metas: dict[str, TreeMeta] = {}
    for change in changes:
        tree = change.node.tree_id
        if tree not in metas:
            metas[tree] = (await svc.contexts.tree(tree)).meta
        if not may_read_tree(metas[tree], svc.agent_id):
            withheld += 1
            continue
        nodes, hidden = _shown(svc, [change.node])
        withheld += len(hidden)
        kept.append(ContextChangeOut(seq=change.seq, node=nodes[0]))
    out = ContextChangesOut(changes=kept, next_cursor=following, withheld=withheld)
    lines = [f"[{c.seq}] tree {c.node.tree_id[:8]} " + _line(c.node).lstrip("- ") for c in kept]
    return result(out, "\n".join(lines or ["No changes."]) + f"\nnext_cursor: {following}")


async def warp_context_list(
    rt: WarpRuntime,
    kind: Annotated[
        Literal["tree", "thread", "dm-thread"] | None, Field(description="Only trees of this kind")
    ] = None,
    limit: Annotated[int, Field(ge=1, le=500)] = 50,
    cursor: Cursor | None = None,
) -> Annotated[CallToolResult, ContextListOut]:
    """The trees you may read, newest first: threads and trees agents or operators created
    (a work item's tree has the work id as its id and is not listed)."""
    from shared.context.store import INDEX_DM, INDEX_THREAD, INDEX_TREE, page_entries
    from shared.context.trees import may_read_tree
    from shared.paging import decode_cursor

    decode_cursor(cursor)  # a cursor this listing did not issue is refused before any read
    svc = await rt.services()
    prefix = {"tree": INDEX_TREE, "thread": INDEX_THREAD, "dm-thread": INDEX_DM}.get(kind or "", "")
    entries = await svc.contexts.entries(f"{prefix}.>" if prefix else ">")
    mine = [e for e in entries if may_read_tree(TreeMeta(participants=e.participants), svc.agent_id)]
    page = page_entries(mine, limit=limit, cursor=cursor)
    out = ContextListOut(trees=page.items, next_cursor=page.next_cursor)
    lines = [
        f"- {e.tree_id} [{e.kind}] {e.title or '(untitled)'}"
        + (" (scheduled for deletion)" if e.deleting else "")
        for e in page.items
    ]
    if page.next_cursor:
        lines.append(f"More: next_cursor {page.next_cursor}")
    return result(out, "\n".join(lines) or "No trees.")


async def warp_context_read(
    rt: WarpRuntime,
    tree_id: TreeId,
    limit: Annotated[int, Field(ge=1, le=500)] = 50,
    cursor: Cursor | None = None,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, ThreadOut]:
    """A tree's nodes with their content, in tree order (each under the node it answers),
    paged; with as_of_seq / as_of, as the tree stood then."""
    from shared.context.reads import check_cursor, in_tree_order
    from shared.context.trees import upto_of
    from warp.tools.channels import thread_out, thread_text

    check_cursor(cursor, tree_id)
    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    upto = upto_of(state, as_of_seq, as_of)
    page, following = in_tree_order(state, limit=limit, cursor=cursor, upto=upto)
    out = thread_out(tree_id, state.meta, page, following, svc.agent_id, svc.identity.user_id)
    return result(out, thread_text(out))


async def warp_context_node(
    rt: WarpRuntime, tree_id: TreeId, node_id: NodeId, as_of_seq: AsOfSeq = None, as_of: AsOf = None
) -> Annotated[CallToolResult, ContextNodeDetailOut]:
    """One node read directly: its newest version (or the one it had then), every version
    with its stream sequence, its parent and visible children."""
    from shared.context.reads import NodeDetail
    from shared.context.trees import upto_of

    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    detail = NodeDetail.of(state, upto_of(state, as_of_seq, as_of), node_id=node_id)
    nodes, withheld = _shown(svc, [detail.node])
    out = ContextNodeDetailOut(**{**dict(detail), "node": nodes[0]}, withheld=bool(withheld))
    text = f"{_line(out.node)}\n{len(out.versions)} version(s); {len(out.children)} child(ren)"
    return result(out, text + (" (hidden by a tombstone)" if out.hidden else ""))


async def warp_context_leaves(
    rt: WarpRuntime,
    tree_id: TreeId,
    limit: Annotated[int, Field(ge=1, le=10_000)] = 500,
    include_hidden: bool = False,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, ContextLeavesOut]:
    """The ends of a tree's branches (a context is the path to one of them), in tree order."""
    from shared.context.reads import leaves
    from shared.context.trees import upto_of

    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    found, more = leaves(state, upto_of(state, as_of_seq, as_of), include_hidden=include_hidden, limit=limit)
    out = ContextLeavesOut.of(tree_id, found, more)
    lines = [f"- {r.id} [{r.kind}] {r.author[:8]} (depth {r.depth})" for r in found]
    return result(out, "\n".join(lines) + ("\nMore leaves than the limit." if more else ""))


async def warp_context_handles(
    rt: WarpRuntime,
    tree_id: TreeId,
    node_id: NodeId,
    include_hidden: bool = False,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, ContextHandlesOut]:
    """The handles alone along the path root -> node: a light read when you fetch the
    content yourself (or resolve only some)."""
    from shared.context.reads import HandleAt
    from shared.context.trees import upto_of

    svc = await rt.services()
    state = await _readable_tree(svc, tree_id)
    path = state.path_at(node_id, upto_of(state, as_of_seq, as_of), include_hidden=include_hidden)
    shown, withheld = _shown(svc, path)
    hidden = set(withheld)
    handles = [HandleAt(node_id=n.id, handle=ContextHandle() if n.id in hidden else n.handle) for n in shown]
    out = ContextHandlesOut(tree_id=tree_id, handles=handles, withheld=withheld)
    lines = [f"{h.node_id}: {h.handle.source}:{h.handle.id}" for h in handles]
    return result(out, "\n".join(lines))


def _own_tree(svc: Services, state: TreeState, doing: str) -> None:
    """An agent changes only a tree it created (Weft, the operator's view, may change any)."""
    from shared.errors import Forbidden

    assert state.root is not None
    if state.nodes[state.root].author != svc.agent_id:
        raise Forbidden(f"only the agent that created the tree may {doing} it", field="tree_id")


async def warp_context_tree_update(
    rt: WarpRuntime,
    tree_id: TreeId,
    title: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
    description: Annotated[str | None, Field(max_length=2000)] = None,
    ref: Annotated[Metadata | None, Field(description="What the tree belongs to (up to 8 pairs)")] = None,
) -> Annotated[CallToolResult, ContextTreeOut]:
    """Change a tree you created: title, description, ref (omitted ones keep theirs). Its
    kind and participants are fixed."""

    from shared.context.trees import tree_change

    svc = await rt.services()
    _own_tree(svc, await _readable_tree(svc, tree_id), "change")
    change = tree_change(title=title, description=description, ref=ref)
    state = await svc.contexts.update_tree(
        tree_id, change, author=svc.agent_id, author_user=svc.identity.user_id
    )
    assert state.root is not None
    out = ContextTreeOut(tree_id=tree_id, meta=state.meta, root=state.latest(state.root))
    return result(out, f"Tree {tree_id}: {state.meta.title}")


async def warp_context_tree_delete(rt: WarpRuntime, tree_id: TreeId) -> Annotated[CallToolResult, TreeView]:
    """Delete a tree you created, staged: it takes no more writes and is purged after the
    deletion window (7 days) unless restored before (warp_context_tree_restore)."""
    from shared.context.trees import DELETION_WINDOW_S
    from shared.models import utcnow

    svc = await rt.services()
    _own_tree(svc, await _readable_tree(svc, tree_id), "delete")
    state, _ = await svc.contexts.schedule_deletion(
        tree_id,
        window_s=DELETION_WINDOW_S,
        author=svc.agent_id,
        author_user=svc.identity.user_id,
        now=utcnow(),
    )
    out = TreeView.of(state)
    assert out.deleting is not None
    return result(
        out,
        f"Tree {tree_id} is scheduled for deletion: purged after {out.deleting.purge_after:%Y-%m-%d %H:%M}Z.",
    )


async def warp_context_tree_restore(rt: WarpRuntime, tree_id: TreeId) -> Annotated[CallToolResult, TreeView]:
    """Undo the scheduled deletion of a tree you created (before it is purged)."""
    svc = await rt.services()
    _own_tree(svc, await _readable_tree(svc, tree_id), "restore")
    state = await svc.contexts.restore(tree_id, author=svc.agent_id, author_user=svc.identity.user_id)
    return result(TreeView.of(state), f"Tree {tree_id} is restored.")


TOOLS = (
    tool(warp_context_create, title="Create a context tree"),
    tool(warp_context_append, title="Append to a context tree"),
    tool(warp_context_update, title="Update a context node"),
    tool(warp_context_tombstone, title="Tombstone a context node", destructive=True),
    tool(warp_context_path, title="Context path", read_only=True, idempotent=True),
    tool(warp_context_structure, title="Context tree structure", read_only=True, idempotent=True),
    tool(warp_context_resolve, title="Resolve context handles", read_only=True, idempotent=True),
    tool(warp_context_changes, title="Context changes", read_only=True, idempotent=True),
    tool(warp_context_list, title="List context trees", read_only=True, idempotent=True),
    tool(warp_context_read, title="Read a context tree", read_only=True, idempotent=True),
    tool(warp_context_node, title="Read a context node", read_only=True, idempotent=True),
    tool(warp_context_leaves, title="Context tree leaves", read_only=True, idempotent=True),
    tool(warp_context_handles, title="Handles along a context path", read_only=True, idempotent=True),
    tool(warp_context_tree_update, title="Change a context tree"),
    tool(warp_context_tree_delete, title="Delete a context tree (staged)", destructive=True),
    tool(warp_context_tree_restore, title="Restore a context tree"),
)
