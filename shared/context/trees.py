"""Context trees: the pure model (docs/context.md).

A context tree is a branching record of what was tried, said and decided, made of
immutable nodes. A node holds a **handle** to data that lives elsewhere (a work item,
a channel message, a memory, a file at a commit, a URL) or, for small things, its own
``text``; plus who wrote it, when, a kind and role, and a few string pairs.

Nothing is rewritten: an update is a new node that *supersedes* one (views show the
newest version in its place, with the original's children), and removal is a
*tombstone* node that hides the target's subtree while the history stays stored.

This module has no I/O: :class:`TreeState` is built from nodes in the order the
stream stored them and answers every read (path, children, structure, tree order,
newest first) in memory; :func:`check_append` is the rule an append must pass.
``shared/context/store.py`` keeps these states current from JetStream.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, NamedTuple, TypeVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from shared import names
from shared.base import LoomModel
from shared.errors import Conflict, Invalid, NotFound, TooMany
from shared.models import AgentId, Scope, Token, new_id, utcnow

MAX_TEXT: Final = 64_000
"""Characters of text a node may hold (a channel or direct message's own limit)."""
MAX_META: Final = 32
MAX_NODES_PER_TREE: Final = 100_000
MAX_DEPTH: Final = 10_000
"""Levels a tree may have below its root (an append deeper is refused)."""
DELETION_WINDOW_S: Final = 7 * 24 * 3600
"""How long a deleted tree can be restored before it is purged (Weft: WEFT_CONTEXT_DELETION_WINDOW_S)."""
TREES_PER_MINUTE: Final = 60
"""Trees one agent may create a minute (Warp: LOOM_CONTEXT_TREES_PER_MINUTE)."""
MAX_STRUCTURE: Final = 10_000
"""Nodes one structure read returns at most (pass the cursor for more)."""
MAX_PAGE: Final = 500
HANDOFF_NODES: Final = 20
HANDOFF_CHARS: Final = 16_000
HANDOFF_NODE_CHARS: Final = 2_000
AUTHOR_RULE: Final = "an agent id or a name of lowercase letters, digits, '-' and '_' (1-64 characters)"
_AUTHOR = re.compile(names.TOKEN_PATTERN)
_COMMIT = re.compile(r"[0-9a-f]{7,64}")
_URL = re.compile(r"https?://[^\s]{1,2040}")


class ContextError(Invalid):
    """An input that breaks a rule of context trees."""


class ContextNotFound(NotFound):
    pass


class ContextConflict(Conflict):
    pass


def tree_missing() -> ContextNotFound:
    # The id is not repeated (the caller sent it; it may not be an id at all).
    return ContextNotFound("no context tree with this id in this project", field="tree_id")


def node_missing(field_name: str = "node_id") -> ContextNotFound:
    return ContextNotFound("no node with this id in this tree", field=field_name)


# -- handles -------------------------------------------------------------------------------


class HandleSource(StrEnum):
    """Where a node's content lives."""

    INLINE = "inline"  # the node's own ``text``
    WORK = "loom-work"  # a work item: id = work id
    CHANNEL = "loom-channel"  # a channel message: id = "<channel>/<seq>"
    DIRECT = "loom-dm"  # a direct message: id = message id (its text is kept in the node)
    CONTEXT = "loom-context"  # a node of a tree: id = "<tree>/<node>"
    MEMORY = "pattern-memory"  # a Pattern memory: id = memory id
    GIT = "git"  # a file at a commit: id = path, version = commit
    FILE = "file"  # a file: id = path, version optional
    URL = "url"  # id = an http(s) URL


LOOM_SOURCES: Final = frozenset(
    {HandleSource.INLINE, HandleSource.WORK, HandleSource.CHANNEL, HandleSource.DIRECT, HandleSource.CONTEXT}
)
"""Sources Loom itself resolves into content (``resolve``)."""

_HEX32 = re.compile(names.ID_PATTERN)


Meta = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]{1,64}$")],
        Annotated[str, Field(max_length=1000)],
    ],
    Field(max_length=MAX_META, description=f"Up to {MAX_META} string pairs"),
]


SourceName = Annotated[
    str, Field(pattern=names.anchored(names.SOURCE_PATTERN), description=names.SOURCE_RULE)
]


class ContextHandle(LoomModel):
    """A pointer to data that lives elsewhere: ``source`` (any source system, by name) +
    ``id`` + optional ``version`` and ``metadata`` (e.g. a content type). Loom's own
    sources (:class:`HandleSource`) have rules for their ids; any other source's id is
    its own business."""

    source: SourceName = HandleSource.INLINE
    id: str = Field(
        default="", max_length=2048, description="What to fetch from the source (empty for inline)"
    )
    version: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The source's version of it (a commit, an etag, ...)",
    )
    metadata: Meta = Field(default_factory=dict, description="About the handle: e.g. content_type")

    @model_validator(mode="after")
    def _shape(self) -> ContextHandle:
        if self.source == HandleSource.INLINE and not self.id and self.version is None:
            return self  # most nodes: nothing to check
        rule = _handle_rule(self.source, self.id, self.version)
        if rule is not None:
            raise ValueError(f"handle: {rule}")
        return self


def _handle_rule(source: str, ident: str, version: str | None) -> str | None:
    """Why (source, id, version) is not a handle, or None when it is one."""
    if source == HandleSource.INLINE:
        return None if not ident and version is None else "an inline handle takes no id or version"
    if not ident:
        return "id is required for every source but inline"
    if source in (HandleSource.WORK, HandleSource.DIRECT, HandleSource.MEMORY):
        return None if _HEX32.fullmatch(ident) else f"id of source {source} must be {names.ID_RULE}"
    if source == HandleSource.CHANNEL:
        channel, _, seq = ident.partition("/")
        ok = re.fullmatch(names.TOKEN_PATTERN, channel) is not None and seq.isdigit() and int(seq) > 0
        return None if ok else "id of source loom-channel must be <channel>/<sequence>"
    if source == HandleSource.CONTEXT:
        tree, _, node = ident.partition("/")
        ok = _HEX32.fullmatch(tree) is not None and _HEX32.fullmatch(node) is not None
        return None if ok else "id of source loom-context must be <tree id>/<node id>"
    if source == HandleSource.GIT:
        if version is None or _COMMIT.fullmatch(version) is None:
            return "version of source git must be a commit (7-64 lowercase hex characters)"
        return None
    if source == HandleSource.URL:
        return None if _URL.fullmatch(ident) else "id of source url must be an http:// or https:// URL"
    return None


def channel_handle(channel: str, seq: int) -> ContextHandle:
    return ContextHandle(source=HandleSource.CHANNEL, id=f"{channel}/{seq}")


# -- nodes ---------------------------------------------------------------------------------

TreeKind = Literal["work", "thread", "dm-thread", "tree"]


class TreeMeta(LoomModel):
    """What a tree is about; carried by its root node (a tree needs no other record)."""

    kind: TreeKind = "tree"
    title: str = Field(default="", max_length=200)
    description: str = Field(default="", max_length=2000)
    ref: dict[str, str] = Field(default_factory=dict, max_length=8)
    """What the tree belongs to: ``work_id``, or ``channel`` and ``seq`` of a thread's root."""
    participants: list[AgentId] = Field(default_factory=list, max_length=64)
    """Empty: every agent of the project may read it; else only these (direct-message threads)."""

    @field_validator("participants")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        return [names.validate_agent_id(a, "participants") for a in v]


class TreeChange(LoomModel):
    """New metadata for a tree: omitted fields keep theirs. A tree's kind and participants
    are fixed (work, thread and direct-message trees are made by Loom)."""

    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    ref: (
        dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")], Annotated[str, Field(max_length=1000)]]
        | None
    ) = Field(default=None, max_length=8, description="What the tree belongs to (trees you created only)")


def changed_meta(meta: TreeMeta, change: TreeChange) -> TreeMeta:
    """``meta`` with ``change`` applied, or a refusal naming the field."""
    if change.ref is not None and meta.kind != "tree" and change.ref != meta.ref:
        raise ContextError("a work, thread or direct-message tree keeps what it belongs to", field="ref")
    given = change.model_dump(exclude_none=True)
    return meta.model_copy(update=given)


Id32 = Annotated[str, Field(pattern=names.anchored(names.ID_PATTERN), description=names.ID_RULE)]
TokenField = Annotated[str, Field(pattern=names.anchored(names.TOKEN_PATTERN), description=names.TOKEN_RULE)]


class ContextNode(LoomModel):
    """One immutable node, as stored (one message on the tree's subject).

    Rules are pydantic constraints (checked in its core, not in Python), since every
    node read from the stream is validated again: a cold read of a big tree parses
    thousands."""

    v: int = 1
    id: Id32 = Field(default_factory=new_id)
    tree_id: Id32
    parent_id: Id32 | None = None
    kind: TokenField = "note"
    role: TokenField | None = None
    handle: ContextHandle = Field(default_factory=ContextHandle)
    author: Annotated[str, Field(pattern=names.anchored(names.TOKEN_PATTERN), description=AUTHOR_RULE)]
    author_user: str | None = Field(default=None, max_length=64)
    scope: Scope = Scope.TEAM
    """Who may read the node's content: as for channel messages (private: its author,
    personal: its author's user, team/public: the project)."""
    at: datetime = Field(default_factory=utcnow)
    text: str | None = Field(default=None, max_length=MAX_TEXT)
    meta: Meta = Field(default_factory=dict)
    supersedes: Id32 | None = None
    """This node replaces that one (an update; the original stays stored)."""
    target: Id32 | None = None
    """For a tombstone: the node whose subtree it hides."""
    tree: TreeMeta | None = None
    """Only on the root."""

    @property
    def is_root(self) -> bool:
        """The tree's first node (a new version of the root supersedes it instead)."""
        return self.parent_id is None and self.supersedes is None


TOMBSTONE: Final = "tombstone"
DELETION: Final = "tree-deletion"
"""A mark under the root: the tree is scheduled for deletion (``meta.purge_after``)."""
RESTORE: Final = "tree-restore"
"""A mark under the root: a scheduled deletion was undone."""
RESERVED_KINDS: Final = frozenset({TOMBSTONE, DELETION, RESTORE})


class NodeInput(LoomModel):
    """What a caller gives to append a node (Warp's and Weft's input)."""

    parent_id: Annotated[
        str, Field(description="The node to append under (any node: a second child is a branch)")
    ]
    kind: Token = "note"
    role: Token | None = None
    handle: ContextHandle = Field(default_factory=ContextHandle)
    text: str | None = Field(default=None, max_length=MAX_TEXT, validate_default=True)
    meta: Meta = Field(default_factory=dict)
    scope: Scope = Scope.TEAM

    @field_validator("parent_id")
    @classmethod
    def _parent(cls, v: str) -> str:
        return names.validate_id(v, "parent_id")

    @field_validator("kind", "role")
    @classmethod
    def _tokens(cls, v: str | None, info: Any) -> str | None:
        if v in RESERVED_KINDS:
            raise ValueError("is reserved: tombstones and tree deletions have their own operations")
        return None if v is None else names.validate_token(v, info.field_name)

    @field_validator("text")
    @classmethod
    def _content(cls, v: str | None, info: Any) -> str | None:
        handle = info.data.get("handle")
        if (handle is None or handle.source == HandleSource.INLINE) and not v:
            raise ValueError("required with an inline handle (the node's content is its text)")
        return v


def node_input(**fields: Any) -> NodeInput:
    """A :class:`NodeInput` from loose arguments, or a :class:`ContextError` naming the
    fields at fault (never their values)."""
    return _checked(NodeInput, fields)


def tree_change(**fields: Any) -> TreeChange:
    """A :class:`TreeChange` from loose arguments (refusals as :func:`node_input`'s)."""
    return _checked(TreeChange, fields)


_M = TypeVar("_M", bound=LoomModel)


def _checked(model: type[_M], fields: dict[str, Any]) -> _M:
    from pydantic import ValidationError

    from shared.errors import describe_problems, validation_problems

    try:
        return model(**fields)
    except ValidationError as exc:
        problems = validation_problems(exc.errors(include_url=False, include_input=False))
        first = problems[0].field if problems else None
        raise ContextError(describe_problems(problems), field=first) from None


class CreationRate:
    """How many trees one agent may create a minute (the design's "prevent tree creation
    spam"): a sliding window over the last 60 seconds."""

    WINDOW_S: Final = 60.0

    def __init__(
        self, per_minute: int = TREES_PER_MINUTE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._times: deque[float] = deque()

    def admit(self) -> None:
        """Count one creation, or refuse it naming the rule and how long to wait."""
        now = self._clock()
        while self._times and now - self._times[0] >= self.WINDOW_S:
            self._times.popleft()
        if len(self._times) >= self.per_minute:
            wait = max(1, math.ceil(self.WINDOW_S - (now - self._times[0])))
            raise TooMany(
                f"at most {self.per_minute} new context trees a minute per agent "
                f"(LOOM_CONTEXT_TREES_PER_MINUTE); try again in {wait} s",
                rule="trees-per-minute",
            )
        self._times.append(now)


# -- ids derived from what a tree is about ------------------------------------------------------


def derive_id(*parts: str | int) -> str:
    """A stable 32-hex id: two writers of the same fact pick the same id, so the stream's
    duplicate window (and readers) keep one copy."""
    raw = "\0".join(("loom-context", *(str(p) for p in parts)))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def work_root_id(work_id: str) -> str:
    return derive_id("work-root", work_id)


def work_attempt_id(work_id: str, attempt: int) -> str:
    return derive_id("work-attempt", work_id, attempt)


def channel_thread_id(channel: str, root_seq: int) -> str:
    return derive_id("channel-thread", channel, root_seq)


def channel_node_id(channel: str, seq: int) -> str:
    return derive_id("channel-message", channel, seq)


def dm_thread_id(root_message_id: str) -> str:
    return derive_id("dm-thread", root_message_id)


def dm_node_id(message_id: str) -> str:
    return derive_id("dm-message", message_id)


# -- the state of one tree ----------------------------------------------------------------------------


class NodeRef(NamedTuple):
    """A node without its content (structure reads, lightweight navigation); a tuple,
    since a structure read builds thousands."""

    id: str
    """The node's original id (stable across updates)."""
    version: str
    """The id of its newest version (== id until it is updated)."""
    parent_id: str | None
    kind: str
    role: str | None
    author: str
    at: datetime
    source: str
    has_text: bool
    updated: bool
    depth: int
    children: int


new_ref = NodeRef._make

_Info = tuple[str, str, "str | None", str, "str | None", str, datetime, str, bool, bool]


@dataclass
class TreeState:
    """Everything known about one tree, built from its nodes in stream order."""

    tree_id: str
    root: str | None = None
    nodes: dict[str, ContextNode] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    """Every version id -> the original node id it is a version of."""
    current: dict[str, str] = field(default_factory=dict)
    """Original id -> newest version id."""
    children: dict[str, list[str]] = field(default_factory=dict)
    """Original id -> its children's original ids, in arrival order."""
    versions: dict[str, list[str]] = field(default_factory=dict)
    """Original id -> every version's id, oldest (the original) first."""
    depths: dict[str, int] = field(default_factory=dict)
    """Original id -> levels below the root."""
    deletions: list[str] = field(default_factory=list)
    """Ids of the tree's deletion and restore marks, in arrival order (see :func:`deletion`)."""
    tombstones: dict[str, str] = field(default_factory=dict)
    """Original id -> the tombstone node that hides it."""
    order: list[str] = field(default_factory=list)
    """Original ids in arrival order (newest last)."""
    orphans: dict[str, list[tuple[ContextNode, int]]] = field(default_factory=dict)
    shapes: dict[tuple[str, int | None, bool, int], tuple[int, list[NodeRef]]] = field(default_factory=dict)
    """Structure reads kept until the tree changes (see :func:`structure`)."""
    shape: list[NodeRef] | None = None
    """The whole visible tree's structure, once read, kept current as nodes are appended
    (an append inserts one row instead of the next read rebuilding 10,000)."""
    shape_ids: list[str] = field(default_factory=list)
    up: dict[str, str | None] = field(default_factory=dict)
    """Original id -> its parent's original id (paths walk this)."""
    max_seq: int = 0
    _hidden: tuple[int, frozenset[str]] = (-1, frozenset())
    info: dict[str, _Info] = field(default_factory=dict)
    """Original id -> what a :class:`NodeRef` shows of its newest version (kept ready:
    a structure read of 10,000 nodes builds 10,000 refs)."""
    """Nodes whose parent (or target) has not arrived yet, by the id they wait for."""
    last_seq: int = 0
    size: int = 0
    """Messages applied (every version and tombstone)."""

    # -- applying ------------------------------------------------------------------------------
    def add(self, node: ContextNode, seq: int) -> None:
        """Apply one stored node (idempotent; a node whose parent is unknown waits for it)."""
        self.last_seq = max(self.last_seq, seq)
        if node.id in self.nodes or node.tree_id != self.tree_id:
            return
        waits_for = self._missing(node)
        if waits_for is not None:
            self.orphans.setdefault(waits_for, []).append((node, seq))
            return
        self._apply(node, seq)
        pending = [node.id]
        while pending:
            for child, child_seq in self.orphans.pop(pending.pop(), []):
                if child.id not in self.nodes and self._missing(child) is None:
                    self._apply(child, child_seq)
                    pending.append(child.id)

    def _missing(self, node: ContextNode) -> str | None:
        for needed in (node.parent_id, node.supersedes, node.target):
            if needed is not None and needed not in self.origin:
                return needed
        return None

    def _apply(self, node: ContextNode, seq: int) -> None:
        self.nodes[node.id] = node
        self.seqs[node.id] = seq
        self.size += 1
        self.max_seq = max(self.max_seq, seq)
        if node.kind in (DELETION, RESTORE) and node.parent_id == self.root and node.target is None:
            self.deletions.append(node.id)  # a mark on the tree, not a node of it
            return
        if node.target is not None:
            hidden = self.origin[node.target]
            if hidden not in self.tombstones:
                self.tombstones[hidden] = node.id
                if self.shape is not None:
                    self._cut_shape(hidden)
            return
        if node.supersedes is not None:
            first = self.origin[node.supersedes]
            self.origin[node.id] = first
            self.current[first] = node.id
            self.versions[first].append(node.id)
            self._note(first, node)
            if self.shape is not None:
                self._renew_shape_row(first)
            return
        self.origin[node.id] = node.id
        self.current[node.id] = node.id
        self.versions[node.id] = [node.id]
        self.order.append(node.id)
        parent = None if node.parent_id is None else self.origin[node.parent_id]
        self.up[node.id] = parent
        self.depths[node.id] = 0 if parent is None else self.depths[parent] + 1
        self._note(node.id, node)
        if parent is None:
            if self.root is None:
                self.root = node.id
            return
        self.children.setdefault(parent, []).append(node.id)
        if self.shape is not None:
            self._grow_shape(parent, node.id)

    def _grow_shape(self, parent: str, first: str) -> None:
        """Insert a new leaf into the kept structure: after the last visible node of its
        parent's subtree (children are in arrival order), its parent's child count + 1."""
        shape, ids = self.shape, self.shape_ids
        assert shape is not None
        try:
            at_parent = ids.index(parent)
        except ValueError:
            return  # the parent is hidden: the visible tree does not change
        last = parent
        while True:
            kids = [k for k in self.children.get(last, ()) if k != first and k not in self.tombstones]
            if not kids:
                break
            last = kids[-1]
        at_last = at_parent if last == parent else ids.index(last, at_parent)
        above = shape[at_parent]
        shape[at_parent] = above._replace(children=above.children + 1)
        shape.insert(at_last + 1, new_ref((*self.info[first], above.depth + 1, 0)))
        ids.insert(at_last + 1, first)

    def _renew_shape_row(self, first: str) -> None:
        """A node was updated: its row shows the newest version (same place, same children)."""
        assert self.shape is not None
        try:
            at = self.shape_ids.index(first)
        except ValueError:
            return  # hidden: not in the structure
        row = self.shape[at]
        self.shape[at] = new_ref((*self.info[first], row.depth, row.children))

    def _cut_shape(self, first: str) -> None:
        """A node was tombstoned: its rows and its subtree's leave the structure."""
        shape, ids = self.shape, self.shape_ids
        assert shape is not None
        try:
            at = ids.index(first)
        except ValueError:
            return  # hidden already
        depth = shape[at].depth
        end = at + 1
        while end < len(shape) and shape[end].depth > depth:
            end += 1
        del shape[at:end]
        del ids[at:end]
        parent = self.parent_of(first)
        if parent is not None and parent in ids:
            above = ids.index(parent)
            shape[above] = shape[above]._replace(children=shape[above].children - 1)

    def hidden_set(self) -> frozenset[str]:
        """Every node a tombstone hides (computed once per change of the tree)."""
        size, found = self._hidden
        if size == self.size:
            return found
        hidden: set[str] = set()
        for top in self.tombstones:
            if top in hidden:
                continue
            stack = [top]
            while stack:
                at = stack.pop()
                hidden.add(at)
                stack.extend(self.children.get(at, ()))
        self._hidden = (self.size, frozenset(hidden))
        return self._hidden[1]

    def _note(self, first: str, newest: ContextNode) -> None:
        parent = self.nodes[first].parent_id
        self.info[first] = (
            first,
            newest.id,
            None if parent is None else self.origin[parent],
            newest.kind,
            newest.role,
            newest.author,
            newest.at,
            newest.handle.source,
            bool(newest.text),
            newest.id != first,
        )

    # -- reading ------------------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return self.root is not None

    @property
    def meta(self) -> TreeMeta:
        """What the tree is about, as its root's newest version says (an update of the
        tree's metadata is a new version of the root)."""
        if self.root is None:
            return TreeMeta()
        root = self.latest(self.root)
        return root.tree if root.tree is not None else TreeMeta()

    def node_count(self) -> int:
        """Nodes in the tree (originals, tombstoned ones included)."""
        return len(self.order)

    def find(self, node_id: str, field_name: str = "node_id") -> str:
        """The original id of ``node_id`` (any of its versions)."""
        first = self.origin.get(node_id)
        if first is None:
            raise node_missing(field_name)
        return first

    def latest(self, first: str) -> ContextNode:
        return self.nodes[self.current[first]]

    def parent_of(self, first: str) -> str | None:
        return self.up[first]

    def hidden(self, first: str) -> bool:
        """Whether a tombstone hides this node (on it or on an ancestor)."""
        at: str | None = first
        while at is not None:
            if at in self.tombstones:
                return True
            at = self.parent_of(at)
        return False

    def path(self, node_id: str, *, include_hidden: bool = False) -> list[ContextNode]:
        """Root -> node, each in its newest version."""
        first = self.find(node_id)
        chain: list[str] = []
        at: str | None = first
        up, tombs = self.up, self.tombstones
        while at is not None:
            chain.append(at)
            at = up[at]
        hidden = bool(tombs) and any(n in tombs for n in chain)
        if hidden and not include_hidden:
            raise ContextNotFound(
                "is in a tombstoned subtree (pass include_hidden to see it)", field="node_id"
            )
        nodes, current = self.nodes, self.current
        return [nodes[current[n]] for n in reversed(chain)]

    def ref(self, first: str, depth: int) -> NodeRef:
        return NodeRef(*self.info[first], depth, len(self.children.get(first, ())))

    def walk(
        self, start: str | None = None, *, max_depth: int | None = None, include_hidden: bool = False
    ) -> Iterator[tuple[str, int]]:
        """(original id, depth below ``start``) in tree order: pre-order, children by arrival."""
        first = self.root if start is None else self.find(start)
        if first is None:
            return
        if not include_hidden and self.hidden(first):
            return
        stack: list[tuple[str, int]] = [(first, 0)]
        while stack:
            at, depth = stack.pop()
            yield at, depth
            if max_depth is not None and depth >= max_depth:
                continue
            kids = self.children.get(at)
            if not kids:
                continue
            for kid in reversed(kids):
                if include_hidden or kid not in self.tombstones:
                    stack.append((kid, depth + 1))

    def newest_first(self, *, include_hidden: bool = False) -> Iterator[str]:
        hidden = frozenset() if include_hidden or not self.tombstones else self.hidden_set()
        for first in reversed(self.order):
            if first not in hidden:
                yield first

    # -- as of a point in the past (time travel) ----------------------------------------------------
    def seq_at(self, when: datetime) -> int:
        """The stream sequence a read "as of ``when``" stops at: the newest node written at
        or before it (writers' clocks; 0 when the tree did not exist yet)."""
        return max((seq for nid, seq in self.seqs.items() if self.nodes[nid].at <= when), default=0)

    def existed(self, first: str, upto: int) -> bool:
        return self.seqs[first] <= upto

    def version_at(self, first: str, upto: int) -> ContextNode:
        """The newest version of a node stored at or before ``upto``."""
        seqs = self.seqs
        for vid in reversed(self.versions[first]):
            if seqs[vid] <= upto:
                return self.nodes[vid]
        raise ContextNotFound("did not exist yet at that point", field="node_id")

    def tombstoned_at(self, first: str, upto: int) -> bool:
        tomb = self.tombstones.get(first)
        return tomb is not None and self.seqs[tomb] <= upto

    def hidden_at(self, first: str, upto: int) -> bool:
        if not self.tombstones:
            return False
        at: str | None = first
        while at is not None:
            if self.tombstoned_at(at, upto):
                return True
            at = self.up[at]
        return False

    def locate(self, node_id: str, upto: int | None, field_name: str = "node_id") -> str:
        """The original id of ``node_id``, which must have been stored by ``upto``."""
        first = self.find(node_id, field_name)
        if upto is not None and not self.existed(first, upto):
            raise ContextNotFound("did not exist yet at that point", field=field_name)
        return first

    def path_at(self, node_id: str, upto: int | None, *, include_hidden: bool = False) -> list[ContextNode]:
        """:meth:`path` as the tree stood at ``upto`` (each node in the version it had then)."""
        if upto is None or upto >= self.max_seq:
            return self.path(node_id, include_hidden=include_hidden)
        first = self.locate(node_id, upto)
        if not include_hidden and self.hidden_at(first, upto):
            raise ContextNotFound(
                "is in a tombstoned subtree (pass include_hidden to see it)", field="node_id"
            )
        chain: list[str] = []
        at: str | None = first
        up = self.up
        while at is not None:
            chain.append(at)
            at = up[at]
        nodes, current, seqs = self.nodes, self.current, self.seqs
        out: list[ContextNode] = []
        for n in reversed(chain):
            newest = current[n]
            out.append(nodes[newest] if seqs[newest] <= upto else self.version_at(n, upto))
        return out

    def visible_children(self, first: str, upto: int, include_hidden: bool) -> list[str]:
        tombs, seqs = self.tombstones, self.seqs
        return [
            kid
            for kid in self.children.get(first, ())
            if seqs[kid] <= upto and (include_hidden or kid not in tombs or seqs[tombs[kid]] > upto)
        ]


def deletion(state: TreeState) -> ContextNode | None:
    """The mark of the tree's scheduled deletion, or None when it is not scheduled (the
    newest mark decides: a restore after it undoes it)."""
    if not state.deletions:
        return None
    newest = state.nodes[state.deletions[-1]]
    return newest if newest.kind == DELETION else None


def purge_after(mark: ContextNode) -> datetime:
    return datetime.fromisoformat(mark.meta["purge_after"])


def check_as_of(as_of_seq: int | None, as_of: datetime | None) -> None:
    if as_of_seq is not None and as_of is not None:
        raise ContextError("give as_of or as_of_seq, not both", field="as_of")


def upto_of(state: TreeState, as_of_seq: int | None, as_of: datetime | None) -> int | None:
    """The stream sequence an as-of read stops at (None: now)."""
    check_as_of(as_of_seq, as_of)
    if as_of is not None:
        if as_of.tzinfo is None:
            raise ContextError("must carry a time zone (e.g. 2026-11-29T12:00:00Z)", field="as_of")
        upto = state.seq_at(as_of)
        field_name = "as_of"
    elif as_of_seq is not None:
        upto, field_name = as_of_seq, "as_of_seq"
    else:
        return None
    if state.root is None or upto < state.seqs[state.root]:
        raise ContextNotFound("the tree did not exist yet at that point", field=field_name)
    return upto


# -- rules for writes ---------------------------------------------------------------------------------


def check_append(state: TreeState, node: ContextNode) -> None:
    """Whether ``node`` may be appended to the tree as it stands (raises when not)."""
    if node.is_root:
        if state.exists:
            raise ContextConflict("this tree already has a root", field="tree_id")
        return
    if not state.exists:
        raise tree_missing()
    if state.size >= MAX_NODES_PER_TREE:
        raise ContextConflict(
            f"the tree is full ({MAX_NODES_PER_TREE} nodes); start a new one", field="tree_id"
        )
    scheduled = deletion(state) is not None
    if node.kind == RESTORE:
        if not scheduled:
            raise ContextConflict("is not scheduled for deletion", field="tree_id")
        return
    if scheduled:
        raise ContextConflict("is scheduled for deletion; restore it first", field="tree_id")
    if node.kind == DELETION:
        return
    if node.target is not None:
        first = state.find(node.target, "node_id")
        if first in state.tombstones:
            raise ContextConflict("is tombstoned already", field="node_id")
        return
    if node.supersedes is not None:
        first = state.find(node.supersedes, "node_id")
        if state.current[first] != node.supersedes:
            raise ContextConflict(
                "has been updated since; update its newest version (see the path or structure)",
                field="node_id",
            )
        if state.hidden(first):
            raise ContextConflict("is in a tombstoned subtree", field="node_id")
        return
    assert node.parent_id is not None
    parent = state.find(node.parent_id, "parent_id")
    if state.hidden(parent):
        raise ContextConflict("is in a tombstoned subtree; append elsewhere", field="parent_id")
    if state.depths[parent] + 1 > MAX_DEPTH:
        raise ContextConflict(
            f"is at the deepest level a tree may have ({MAX_DEPTH} below the root); append higher up",
            field="parent_id",
        )


def update_of(
    state: TreeState, node_id: str, change: NodeInput | None, *, author: str, **fields: Any
) -> ContextNode:
    """The node that supersedes ``node_id``: same place in the tree, new content."""
    first = state.find(node_id)
    newest = state.latest(first)
    base = newest.model_dump(exclude={"id", "at", "supersedes", "author", "author_user", "tree", "v"})
    if change is not None:
        base.update(change.model_dump(exclude={"parent_id"}))
    tree = fields.pop("tree", newest.tree)
    base.update(fields)
    base["parent_id"] = newest.parent_id
    return ContextNode(**base, author=author, supersedes=newest.id, tree=tree)


def readable(node: ContextNode, *, agent_id: str, user_id: str) -> bool:
    """Whether an agent may read the node's content (its scope, as for channel messages)."""
    if node.scope is Scope.PRIVATE:
        return node.author == agent_id
    if node.scope is Scope.PERSONAL:
        return node.author_user == user_id
    return True


def may_read_tree(meta: TreeMeta, agent_id: str) -> bool:
    return not meta.participants or agent_id in meta.participants
