"""Reads over a context tree's state (docs/context.md): paged structure and tree order,
leaves, hand-offs, and the views Warp's tools and Weft's routes return.

Every read takes the stream sequence it stops at (``upto``): a cursor keeps the
sequence of its first page, so pages stay consistent while the tree grows, and an
as-of read (time travel) is the same read stopped earlier. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from pydantic import Field

from shared.base import AnyJson, LoomModel
from shared.context.trees import (
    HANDOFF_CHARS,
    HANDOFF_NODE_CHARS,
    HANDOFF_NODES,
    MAX_PAGE,
    MAX_STRUCTURE,
    ContextError,
    ContextHandle,
    ContextNode,
    NodeRef,
    TreeMeta,
    TreeState,
    deletion,
    purge_after,
    tree_missing,
)
from shared.paging import CursorError, decode_cursor, encode_cursor

# -- paging ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A position in a paged read of one tree: what was stored up to ``upto`` and where the
    previous page ended, so pages stay consistent while the tree grows."""

    tree_id: str
    upto: int
    offset: int

    def encode(self) -> str:
        return encode_cursor({"t": self.tree_id, "u": self.upto, "o": self.offset})

    @classmethod
    def decode(cls, cursor: str | None, tree_id: str, upto: int) -> Snapshot:
        state = decode_cursor(cursor)
        if state is None:
            return cls(tree_id, upto, 0)
        u, o = state.get("u"), state.get("o")
        if state.get("t") != tree_id or not isinstance(u, int) or not isinstance(o, int) or o < 0 or u < 0:
            raise CursorError()
        return cls(tree_id, u, o)


def check_cursor(cursor: str | None, tree_id: str) -> None:
    """Refuse a cursor this tree's reads did not issue before any I/O (names ``cursor``)."""
    Snapshot.decode(cursor, tree_id, 0)


def _begin(state: TreeState, cursor: str | None, upto: int | None, start: str | None) -> tuple[Snapshot, str]:
    """Where a paged read stands: the cursor's point (or ``upto``, or now) and the node it
    starts at (which must have existed then)."""
    horizon = state.last_seq if upto is None else min(upto, max(state.last_seq, state.max_seq))
    snap = Snapshot.decode(cursor, state.tree_id, horizon)
    first = state.root if start is None else state.locate(start, snap.upto)
    assert first is not None
    return snap, first


def _seen(state: TreeState, first: str, upto: int) -> bool:
    return state.seqs[first] <= upto


def structure(
    state: TreeState,
    start: str | None = None,
    *,
    max_depth: int | None = None,
    limit: int = 1000,
    cursor: str | None = None,
    include_hidden: bool = False,
    upto: int | None = None,
) -> tuple[list[NodeRef], str | None]:
    """The subtree below ``start`` (default the root) in tree order, without content; with
    ``upto``, as the tree stood at that stream sequence (a cursor carries its own).

    The whole subtree's refs are kept on the state until the tree changes, so paging
    through it, or reading an unchanged tree again, costs a slice."""
    if not 1 <= limit <= MAX_STRUCTURE:
        raise ContextError(f"must be between 1 and {MAX_STRUCTURE}", field="limit")
    if not state.exists:
        raise tree_missing()
    snap, first = _begin(state, cursor, upto, start)
    if not include_hidden and state.hidden_at(first, snap.upto):
        refs: list[NodeRef] = []
    elif first == state.root and max_depth is None and not include_hidden and snap.upto >= state.max_seq:
        if state.shape is None:
            state.shape = _subtree(state, first, None, False, snap.upto)
            state.shape_ids = [r.id for r in state.shape]
        refs = state.shape
    else:
        key = (first, max_depth, include_hidden, snap.upto)
        cached = state.shapes.get(key)
        if cached is None or cached[0] not in (state.size, FOREVER):
            # the tree as it stood at a past point, once all of it has been read, never
            # changes: later nodes have later sequences (kept while the tree grows)
            past = snap.upto < state.max_seq and snap.upto <= state.last_seq and not state.orphans
            cached = (
                FOREVER if past else state.size,
                _subtree(state, first, max_depth, include_hidden, snap.upto),
            )
            if len(state.shapes) >= SHAPES_KEPT:
                state.shapes.clear()
            state.shapes[key] = cached
        refs = cached[1]
    page = refs[snap.offset : snap.offset + limit]
    more = snap.offset + limit < len(refs)
    following = Snapshot(state.tree_id, snap.upto, snap.offset + len(page)).encode() if more else None
    return page, following


FOREVER: Final = -1
"""Marks a kept shape of a past point: valid however the tree grows."""
SHAPES_KEPT: Final = 8
"""Subtree shapes a tree keeps ready (per start node, depth limit, hidden or not)."""
_tuple_new = tuple.__new__


def _subtree(
    state: TreeState, first: str, max_depth: int | None, include_hidden: bool, upto: int
) -> list[NodeRef]:
    """Pre-order refs below ``first`` (stored up to ``upto``): one tight loop, since a
    structure read of 10,000 nodes is measured against a 50 ms budget."""
    if upto < state.max_seq:
        return _subtree_at(state, first, max_depth, include_hidden, upto)
    info, kids, tombs, seqs = state.info, state.children, state.tombstones, state.seqs
    limit_depth = -1 if max_depth is None else max_depth
    out: list[NodeRef] = []
    append = out.append
    stack: list[tuple[str, int]] = [(first, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        at, depth = pop()
        below = kids.get(at)
        shown = 0
        if below:
            for kid in below:
                if (include_hidden or kid not in tombs) and seqs[kid] <= upto:
                    shown += 1
            if depth != limit_depth:
                nxt = depth + 1
                for kid in reversed(below):
                    if (include_hidden or kid not in tombs) and seqs[kid] <= upto:
                        push((kid, nxt))
        append(_tuple_new(NodeRef, (*info[at], depth, shown)))
    return out


def _subtree_at(
    state: TreeState, first: str, max_depth: int | None, include_hidden: bool, upto: int
) -> list[NodeRef]:
    """:func:`_subtree` as the tree stood at ``upto``: each node in the version it had then,
    hidden by the tombstones stored by then. A node not updated since keeps its ready row."""
    info, kids, tombs, seqs, current = state.info, state.children, state.tombstones, state.seqs, state.current
    limit_depth = -1 if max_depth is None else max_depth
    out: list[NodeRef] = []
    append = out.append
    stack: list[tuple[str, int]] = [(first, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        at, depth = pop()
        below = kids.get(at)
        shown: list[str] = []
        if below:
            for kid in below:
                if seqs[kid] <= upto and (include_hidden or kid not in tombs or seqs[tombs[kid]] > upto):
                    shown.append(kid)
            if depth != limit_depth:
                nxt = depth + 1
                for kid in reversed(shown):
                    push((kid, nxt))
        if seqs[current[at]] <= upto:
            append(_tuple_new(NodeRef, (*info[at], depth, len(shown))))
            continue
        version = state.version_at(at, upto)
        row = (at, version.id, state.up[at], version.kind, version.role, version.author, version.at)
        append(NodeRef(*row, version.handle.source, bool(version.text), version.id != at, depth, len(shown)))
    return out


def in_tree_order(
    state: TreeState,
    *,
    limit: int = 50,
    cursor: str | None = None,
    start: str | None = None,
    upto: int | None = None,
) -> tuple[list[tuple[ContextNode, int]], str | None]:
    """Nodes (newest version, with their depth) in tree order, paged; what a thread read
    returns. With ``upto``, as the tree stood at that stream sequence."""
    if not 1 <= limit <= MAX_PAGE:
        raise ContextError(f"must be between 1 and {MAX_PAGE}", field="limit")
    if not state.exists:
        raise tree_missing()
    snap, first = _begin(state, cursor, upto, start)
    page: list[tuple[ContextNode, int]] = []
    position = 0
    more = False
    stack: list[tuple[str, int]] = [] if state.hidden_at(first, snap.upto) else [(first, 0)]
    while stack:
        at, depth = stack.pop()
        if position >= snap.offset:
            if len(page) == limit:
                more = True
                break
            page.append((state.version_at(at, snap.upto), depth))
        position += 1
        stack.extend((kid, depth + 1) for kid in reversed(state.visible_children(at, snap.upto, False)))
    following = Snapshot(state.tree_id, snap.upto, snap.offset + len(page)).encode() if more else None
    return page, following


@dataclass
class HandOff:
    """What an agent taking over work is given: the tree's nodes, newest first, bounded."""

    tree_id: str
    nodes: list[ContextNode]
    next_cursor: str | None
    total: int
    """Visible nodes in the tree (the page may hold fewer)."""
    truncated: int
    """Nodes of this page whose text was cut to fit the bound."""


def hand_off(
    state: TreeState,
    *,
    limit: int = HANDOFF_NODES,
    max_chars: int = HANDOFF_CHARS,
    node_chars: int = HANDOFF_NODE_CHARS,
    cursor: str | None = None,
) -> HandOff:
    """Newest first, at most ``limit`` nodes and about ``max_chars`` characters of text
    (each node's text cut to ``node_chars``), with a cursor for older ones."""
    if not 1 <= limit <= MAX_PAGE:
        raise ContextError(f"must be between 1 and {MAX_PAGE}", field="limit")
    snap = Snapshot.decode(cursor, state.tree_id, state.last_seq)
    visible = [f for f in state.newest_first() if _seen(state, f, snap.upto)]
    chosen: list[ContextNode] = []
    used = 0
    cut = 0
    for first in visible[snap.offset :]:
        if len(chosen) == limit:
            break
        node = state.latest(first)
        text = node.text or ""
        if len(text) > node_chars:
            text = text[: node_chars - 1] + "…"
            cut += 1
        if chosen and used + len(text) > max_chars:
            break
        used += len(text)
        chosen.append(node if text == (node.text or "") else node.model_copy(update={"text": text}))
    end = snap.offset + len(chosen)
    following = Snapshot(state.tree_id, snap.upto, end).encode() if end < len(visible) else None
    return HandOff(
        tree_id=state.tree_id, nodes=chosen, next_cursor=following, total=len(visible), truncated=cut
    )


def leaves(
    state: TreeState, upto: int | None = None, *, include_hidden: bool = False, limit: int = MAX_STRUCTURE
) -> tuple[list[NodeRef], bool]:
    """The visible nodes with no visible children, in tree order (a context is the path to
    one of them), and whether more were left out past ``limit``."""
    if not state.exists:
        raise tree_missing()
    refs, _ = structure(state, upto=upto, include_hidden=include_hidden, limit=MAX_STRUCTURE)
    found = [r for r in refs if r.children == 0]
    return found[:limit], len(found) > limit


# -- views (the shapes Warp's tools and Weft's routes return) ------------------------------------


class NodeRefView(LoomModel):
    """A node without content, as structure reads return it."""

    id: str = Field(description="The node's original id (stable across updates)")
    version: str = Field(description="The id of its newest version")
    parent_id: str | None
    kind: str
    role: str | None
    author: str
    at: datetime
    source: str = Field(description="Where its content lives (the handle's source)")
    has_text: bool
    updated: bool
    depth: int = Field(description="Levels below the node the read started at")
    children: int

    @classmethod
    def of(cls, ref: NodeRef) -> NodeRefView:
        return cls.model_construct(**ref._asdict())


class ResolvedView(LoomModel):
    node_id: str
    source: str
    id: str
    version: str | None
    resolved: bool
    content: AnyJson = None
    reason: str | None = Field(None, description="Why it was not resolved")


class Deleting(LoomModel):
    """A tree's scheduled deletion (docs/context.md, Deleting a tree)."""

    by: str
    at: datetime
    purge_after: datetime = Field(description="Purged for good after this; restore it before")

    @classmethod
    def of(cls, mark: ContextNode) -> Deleting:
        return cls(by=mark.author, at=mark.at, purge_after=purge_after(mark))


class TreeView(LoomModel):
    """A tree: what it is about, its root, and its size."""

    tree_id: str
    meta: TreeMeta
    root: ContextNode
    nodes: int = Field(description="Nodes in the tree (tombstoned ones included)")
    last_seq: int = Field(description="Stream sequence of the newest node read")
    deleting: Deleting | None = Field(None, description="Set while the tree is scheduled for deletion")

    @classmethod
    def of(cls, state: TreeState) -> TreeView:
        assert state.root is not None
        mark = deletion(state)
        return cls(
            tree_id=state.tree_id,
            meta=state.meta,
            root=state.latest(state.root),
            nodes=state.node_count(),
            last_seq=state.last_seq,
            deleting=None if mark is None else Deleting.of(mark),
        )


class VersionView(LoomModel):
    id: str
    seq: int = Field(description="Context stream sequence it was stored at (an as_of_seq)")
    at: datetime
    author: str


class NodeDetail(LoomModel):
    """One node read directly: the version it has (now or as of a point), every version
    stored by then, its parent and its visible children."""

    tree_id: str
    node: ContextNode
    versions: list[VersionView] = Field(description="Oldest (the original) first")
    parent_id: str | None
    children: list[str] = Field(description="Visible children's ids, in arrival order")
    hidden: bool = Field(description="A tombstone hides it (on it or an ancestor)")

    @classmethod
    def of(cls, state: TreeState, upto: int | None, *, node_id: str) -> NodeDetail:
        horizon = max(state.last_seq, state.max_seq) if upto is None else upto
        first = state.locate(node_id, horizon)
        return cls(
            tree_id=state.tree_id,
            node=state.version_at(first, horizon),
            versions=[
                VersionView(id=v, seq=state.seqs[v], at=state.nodes[v].at, author=state.nodes[v].author)
                for v in state.versions[first]
                if state.seqs[v] <= horizon
            ],
            parent_id=state.up[first],
            children=state.visible_children(first, horizon, False),
            hidden=state.hidden_at(first, horizon),
        )


class LeavesView(LoomModel):
    """A tree's leaves, as Warp's ``warp_context_leaves`` and Weft's ``GET .../leaves`` return them."""

    tree_id: str
    nodes: list[NodeRefView] = Field(description="Visible nodes without visible children, in tree order")
    more: bool = Field(description="More leaves than the limit")

    @classmethod
    def of(cls, tree_id: str, found: list[NodeRef], more: bool) -> LeavesView:
        return cls(tree_id=tree_id, nodes=[NodeRefView.of(r) for r in found], more=more)


class HandleAt(LoomModel):
    node_id: str
    handle: ContextHandle


def handles(
    state: TreeState, node_id: str, upto: int | None, *, include_hidden: bool = False
) -> list[HandleAt]:
    """The handles alone along the path root -> node (a light read for references)."""
    return [
        HandleAt(node_id=n.id, handle=n.handle)
        for n in state.path_at(node_id, upto, include_hidden=include_hidden)
    ]
