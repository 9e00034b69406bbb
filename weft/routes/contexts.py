"""``/api/contexts``: context trees (docs/context.md). Weft is the operator's view: it reads
every tree of the project and every node's content, whatever its scope."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field

from shared.context.reads import (
    HandleAt,
    LeavesView,
    NodeDetail,
    NodeRefView,
    ResolvedView,
    TreeView,
    check_cursor,
    handles,
    in_tree_order,
    leaves,
    structure,
)
from shared.context.store import TreeEntry, check_change_cursor
from shared.context.transfer import TreeExport, export_tree, secret_warnings
from shared.context.trees import (
    MAX_PAGE,
    MAX_STRUCTURE,
    MAX_TEXT,
    ContextHandle,
    ContextNode,
    Meta,
    NodeInput,
    TreeChange,
    TreeMeta,
    TreeState,
    node_input,
    upto_of,
)
from shared.models import utcnow
from shared.names import TOKEN_RULE
from weft.deps import OPERATE, Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.project.hub import ProjectContext
from weft.routes.common import HEX32, TOKEN
from weft.schemas import PageOut
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/contexts",
    tags=["contexts"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)

AUTHOR = "weft-api"
TreeId = Annotated[
    str, Path(pattern=HEX32, description="Context tree id: 32 lowercase hex (a work item's is its id)")
]
NodeId = Annotated[str, Path(pattern=HEX32, description="Node id: 32 lowercase hex")]
AsOfSeq = Annotated[
    int | None,
    Query(ge=1, description="Read the tree as it stood at this context stream sequence (a node's seq)"),
]
AsOf = Annotated[
    datetime | None,
    Query(description="Read the tree as it stood at this time (ISO 8601 with a zone; writers' clocks)"),
]


@dataclass(frozen=True)
class ReadPoint:
    """Where a read stops: a stream sequence or a time (neither: now). Only query
    parameters: a dependency must not read anything, so that every bad parameter of a
    route is refused before its tree is looked up."""

    seq: int | None
    at: datetime | None

    async def read(self, project: ProjectContext, tree_id: str) -> tuple[TreeState, int | None]:
        state = await project.contexts.store.existing(tree_id)
        return state, upto_of(state, self.seq, self.at)


def as_of_point(as_of_seq: AsOfSeq = None, as_of: AsOf = None) -> ReadPoint:
    return ReadPoint(as_of_seq, as_of)


AsOfDep = Annotated[ReadPoint, Depends(as_of_point)]


class TreeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=200)
    text: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)
    handle: ContextHandle | None = None
    meta: Meta = Field(default_factory=dict)


class NodeChange(BaseModel):
    """A new version of a node: omitted fields keep the current version's."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)
    handle: ContextHandle | None = None
    meta: Meta | None = None


class TombstoneIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="", max_length=2000)


class ResolveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_ids: list[Annotated[str, Field(pattern=HEX32)]] = Field(min_length=1, max_length=50)


class NodeOut(BaseModel):
    tree_id: str
    node: ContextNode


class PathOut(BaseModel):
    tree_id: str
    nodes: list[ContextNode] = Field(description="Root first, each node in its newest version")


class StructureOut(BaseModel):
    tree_id: str
    nodes: list[NodeRefView] = Field(description="Tree order (pre-order), without content")
    next_cursor: str | None = None


class DepthNode(BaseModel):
    depth: int
    node: ContextNode


class NodesOut(BaseModel):
    tree_id: str
    items: list[DepthNode] = Field(description="Tree order, with content")
    next_cursor: str | None = None


class ResolveOut(BaseModel):
    tree_id: str
    items: list[ResolvedView]


class ChangeOut(BaseModel):
    seq: int
    node: ContextNode


class HandlesOut(BaseModel):
    tree_id: str
    handles: list[HandleAt] = Field(description="Root first: each node's id and handle, no content")


class ImportOut(BaseModel):
    tree: TreeView
    imported: int = Field(description="Nodes this call stored (0: the document was imported before)")
    warnings: list[str] = Field(
        description="Possible secrets in the document: where and what kind, never the text"
    )


class ChangesOut(BaseModel):
    items: list[ChangeOut]
    next_cursor: str = Field(description="Pass back to get only what is stored after these")


@router.get("", response_model=PageOut[TreeEntry], summary="Listed trees, newest first")
async def list_trees(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    kind: Literal["tree", "thread", "dm-thread"] | None = None,
    channel: Annotated[
        str | None, Query(pattern=TOKEN, description=f"Threads of this channel: {TOKEN_RULE}")
    ] = None,
) -> PageOut[TreeEntry]:
    """Threads and trees agents or operators created (a work item's tree is its id: no listing)."""
    page = await project.contexts.page(kind=kind, channel=channel, limit=limit, cursor=cursor)
    return PageOut[TreeEntry](items=page.items, next_cursor=page.next_cursor, total=page.total)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=TreeView,
    dependencies=OPERATE,
    summary="Start a tree",
)
async def create_tree(body: TreeIn, project: ProjectDep) -> TreeView:
    given = node_input(
        parent_id="0" * 32, text=body.text, handle=body.handle or ContextHandle(), meta=body.meta
    )
    state, _, _ = await project.contexts.store.create_tree(
        TreeMeta(kind="tree", title=body.title),
        author=AUTHOR,
        handle=given.handle,
        text=given.text,
        root_meta=given.meta,
    )
    return TreeView.of(state)


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    response_model=ImportOut,
    dependencies=OPERATE,
    summary="Import an exported tree",
)
async def import_tree(body: TreeExport, project: ProjectDep) -> ImportOut:
    """A document from ``GET /api/contexts/{tree_id}/export`` (this project's or another's)
    becomes a tree of its own here, history included; importing it again adds nothing."""
    tree, imported = await project.contexts.store.import_tree(body, author=AUTHOR)
    return ImportOut(tree=TreeView.of(tree), imported=imported, warnings=secret_warnings(body.nodes))


@router.get("/changes", response_model=ChangesOut, summary="Nodes stored after a cursor, every tree")
async def all_changes(
    project: ProjectDep, cursor: Cursor = None, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100
) -> ChangesOut:
    return await _changes(project, None, cursor, limit)


@router.get("/{tree_id}", response_model=TreeView, summary="One tree: what it is about, root, size")
async def get_tree(tree_id: TreeId, project: ProjectDep) -> TreeView:
    return TreeView.of(await project.contexts.store.existing(tree_id))


@router.get("/{tree_id}/export", response_model=TreeExport, summary="A tree as one JSON document")
async def export_tree_route(tree_id: TreeId, project: ProjectDep) -> TreeExport:
    """Every stored node (versions and tombstones too), and where it looks like a secret."""
    return export_tree(await project.contexts.store.existing(tree_id))


@router.patch("/{tree_id}", response_model=TreeView, dependencies=OPERATE, summary="Change a tree's metadata")
async def update_tree(tree_id: TreeId, body: TreeChange, project: ProjectDep) -> TreeView:
    """Title, description, ref (omitted fields keep theirs): a new version of the root,
    relayed as ``context.tree-updated``. A tree's kind and participants are fixed."""
    return TreeView.of(await project.contexts.store.update_tree(tree_id, body, author=AUTHOR))


@router.delete(
    "/{tree_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TreeView,
    dependencies=OPERATE,
    summary="Schedule a tree's deletion",
)
async def delete_tree(tree_id: TreeId, project: ProjectDep, state: StateDep) -> TreeView:
    """Staged: the tree takes no more writes and is purged after
    ``WEFT_CONTEXT_DELETION_WINDOW_S`` unless restored before (``deleting`` says when).
    ``409`` for a work item's tree (it goes with its record) or one scheduled already."""
    tree, _ = await project.contexts.store.schedule_deletion(
        tree_id, window_s=state.settings.context_deletion_window_s, author=AUTHOR, now=utcnow()
    )
    return TreeView.of(tree)


@router.post("/{tree_id}/restore", response_model=TreeView, dependencies=OPERATE, summary="Undo a deletion")
async def restore_tree(tree_id: TreeId, project: ProjectDep) -> TreeView:
    """Before it is purged; ``409`` when it is not scheduled for deletion."""
    return TreeView.of(await project.contexts.store.restore(tree_id, author=AUTHOR))


@router.get("/{tree_id}/structure", response_model=StructureOut, summary="A subtree without content")
async def get_structure(
    tree_id: TreeId,
    project: ProjectDep,
    node_id: Annotated[str | None, Query(pattern=HEX32, description="Start here (default: the root)")] = None,
    depth: Annotated[int | None, Query(ge=0, le=MAX_STRUCTURE)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_STRUCTURE)] = 1000,
    cursor: Cursor = None,
    include_hidden: bool = False,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> StructureOut:
    check_cursor(cursor, tree_id)
    state = await project.contexts.store.existing(tree_id)
    upto = upto_of(state, as_of_seq, as_of)
    refs, following = structure(
        state, node_id, max_depth=depth, limit=limit, cursor=cursor, include_hidden=include_hidden, upto=upto
    )
    return StructureOut(tree_id=tree_id, nodes=[NodeRefView.of(r) for r in refs], next_cursor=following)


@router.get("/{tree_id}/nodes", response_model=NodesOut, summary="Nodes with content, in tree order")
async def get_nodes(
    tree_id: TreeId,
    project: ProjectDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: Cursor = None,
    as_of_seq: AsOfSeq = None,
    as_of: AsOf = None,
) -> NodesOut:
    """How a thread reads: each reply under the message it answers."""
    check_cursor(cursor, tree_id)
    state = await project.contexts.store.existing(tree_id)
    page, following = in_tree_order(state, limit=limit, cursor=cursor, upto=upto_of(state, as_of_seq, as_of))
    return NodesOut(
        tree_id=tree_id, items=[DepthNode(depth=d, node=n) for n, d in page], next_cursor=following
    )


@router.post(
    "/{tree_id}/nodes",
    status_code=status.HTTP_201_CREATED,
    response_model=NodeOut,
    dependencies=OPERATE,
    summary="Append",
)
async def append_node(tree_id: TreeId, body: NodeInput, project: ProjectDep) -> NodeOut:
    """Under any node (a second child is a branch)."""
    node = await project.contexts.store.append(tree_id, body, author=AUTHOR)
    return NodeOut(tree_id=tree_id, node=node)


@router.get("/{tree_id}/leaves", response_model=LeavesView, summary="The ends of a tree's branches")
async def get_leaves(
    tree_id: TreeId,
    project: ProjectDep,
    point: AsOfDep,
    limit: Annotated[int, Query(ge=1, le=MAX_STRUCTURE)] = 1000,
    include_hidden: bool = False,
) -> LeavesView:
    """A context is the path to one of them."""
    state, upto = await point.read(project, tree_id)
    found, more = leaves(state, upto, include_hidden=include_hidden, limit=limit)
    return LeavesView.of(tree_id, found, more)


@router.get("/{tree_id}/nodes/{node_id}", response_model=NodeDetail, summary="One node, its versions")
async def get_node(tree_id: TreeId, node_id: NodeId, project: ProjectDep, point: AsOfDep) -> NodeDetail:
    """The version it has (now or then), every version stored by then, parent, children."""
    return NodeDetail.of(*await point.read(project, tree_id), node_id=node_id)


@router.get("/{tree_id}/nodes/{node_id}/path", response_model=PathOut, summary="Root to node")
async def get_path(
    tree_id: TreeId, node_id: NodeId, project: ProjectDep, point: AsOfDep, include_hidden: bool = False
) -> PathOut:
    state, upto = await point.read(project, tree_id)
    return PathOut(tree_id=tree_id, nodes=state.path_at(node_id, upto, include_hidden=include_hidden))


@router.get("/{tree_id}/nodes/{node_id}/handles", response_model=HandlesOut, summary="Handles root to node")
async def get_handles(
    tree_id: TreeId, node_id: NodeId, project: ProjectDep, point: AsOfDep, include_hidden: bool = False
) -> HandlesOut:
    """The handles alone along the path (a light read for a caller that fetches content itself)."""
    state, upto = await point.read(project, tree_id)
    return HandlesOut(tree_id=tree_id, handles=handles(state, node_id, upto, include_hidden=include_hidden))


@router.post(
    "/{tree_id}/nodes/{node_id}/versions",
    status_code=status.HTTP_201_CREATED,
    dependencies=OPERATE,
    response_model=NodeOut,
    summary="Update a node (a new node supersedes it)",
)
async def update_node(tree_id: TreeId, node_id: NodeId, body: NodeChange, project: ProjectDep) -> NodeOut:
    store = project.contexts.store
    state = await store.existing(tree_id)
    newest = state.latest(state.find(node_id))
    given = node_input(
        parent_id=newest.parent_id or "0" * 32,
        text=body.text if body.text is not None else newest.text,
        handle=body.handle or newest.handle,
        kind=newest.kind,
        role=newest.role,
        meta=body.meta if body.meta is not None else newest.meta,
        scope=newest.scope,
    )
    return NodeOut(tree_id=tree_id, node=await store.update(tree_id, node_id, given, author=AUTHOR))


@router.post(
    "/{tree_id}/nodes/{node_id}/tombstone",
    status_code=status.HTTP_201_CREATED,
    dependencies=OPERATE,
    response_model=NodeOut,
    summary="Hide a node's subtree (history kept)",
)
async def tombstone_node(
    tree_id: TreeId, node_id: NodeId, project: ProjectDep, body: TombstoneIn | None = None
) -> NodeOut:
    node = await project.contexts.store.tombstone(
        tree_id, node_id, author=AUTHOR, reason=body.reason if body else ""
    )
    return NodeOut(tree_id=tree_id, node=node)


@router.post("/{tree_id}/resolve", response_model=ResolveOut, summary="Content behind Loom handles")
async def resolve(tree_id: TreeId, body: ResolveIn, project: ProjectDep) -> ResolveOut:
    store = project.contexts.store
    state = await store.existing(tree_id)
    done = await store.resolve(state, body.node_ids)
    return ResolveOut(tree_id=tree_id, items=[ResolvedView.model_validate(vars(r)) for r in done])


@router.get("/{tree_id}/changes", response_model=ChangesOut, summary="Nodes of a tree stored after a cursor")
async def tree_changes(
    tree_id: TreeId,
    project: ProjectDep,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> ChangesOut:
    check_change_cursor(cursor, tree_id)
    await project.contexts.store.existing(tree_id)
    return await _changes(project, tree_id, cursor, limit)


async def _changes(project: ProjectDep, tree_id: str | None, cursor: str | None, limit: int) -> ChangesOut:
    changes, following = await project.contexts.store.changes(tree_id, cursor=cursor, limit=limit)
    return ChangesOut(items=[ChangeOut(seq=c.seq, node=c.node) for c in changes], next_cursor=following)
