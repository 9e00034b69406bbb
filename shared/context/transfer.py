"""Export and import of a context tree (docs/context.md, Export and import). Pure: the
document, the renaming an import does and the checks it makes; the store publishes.

An export is every stored node of the tree in stream order (versions and tombstones
included, so history and time travel survive the trip), without the tree's deletion
marks. An import re-homes the tree under ids derived from the original's (importing
the same document twice gives the same tree, and a cut-short import resumes), checks
the whole structure in memory before anything is stored, and reports possible secrets
(kind and position, never the text) as the memory service does."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from shared.base import LoomModel
from shared.context.trees import (
    DELETION,
    MAX_NODES_PER_TREE,
    RESTORE,
    ContextError,
    ContextNode,
    Id32,
    TreeMeta,
    TreeState,
    check_append,
    derive_id,
)
from shared.errors import LoomError
from shared.models import utcnow
from shared.secretscan import scan

EXPORT_FORMAT: Final = "loom-context-tree"
EXPORT_VERSION: Final = 1


class TreeExport(LoomModel):
    """A tree as a JSON document (what ``GET .../export`` returns and import takes)."""

    format: Literal["loom-context-tree"] = EXPORT_FORMAT
    version: Literal[1] = EXPORT_VERSION
    tree_id: Id32 = Field(description="The tree's id where it was exported")
    meta: TreeMeta
    exported_at: datetime = Field(default_factory=utcnow)
    nodes: list[ContextNode] = Field(
        min_length=1,
        max_length=MAX_NODES_PER_TREE,
        description="Every stored node, in the order they were stored",
    )
    warnings: list[str] = Field(default_factory=list, description="Possible secrets: where and what kind")


def export_tree(state: TreeState) -> TreeExport:
    """The document for a tree as stored now (every version and tombstone)."""
    ordered = sorted(
        (n for n in state.nodes.values() if n.kind not in (DELETION, RESTORE)), key=lambda n: state.seqs[n.id]
    )
    return TreeExport(
        tree_id=state.tree_id, meta=state.meta, nodes=ordered, warnings=secret_warnings(ordered)
    )


def secret_warnings(nodes: list[ContextNode]) -> list[str]:
    """Where the nodes' text, handle ids and metadata look like they hold a secret."""
    found: list[str] = []
    for i, node in enumerate(nodes):
        places = [("text", node.text or ""), ("handle.id", node.handle.id)]
        places += [(f"meta.{k}", v) for k, v in node.meta.items()]
        places += [(f"handle.metadata.{k}", v) for k, v in node.handle.metadata.items()]
        for where, text in places:
            found += [f.found(f"nodes.{i}.{where}") for f in scan(text)] if text else []
    return found


def imported_tree_id(original: str) -> str:
    return derive_id("imported-tree", original)


def rehome(document: TreeExport) -> tuple[TreeState, list[ContextNode]]:
    """The document's nodes under the ids of the imported tree, checked as a whole: a
    node that refers to one the document does not hold, or breaks a rule of a write,
    is refused naming its place (``nodes.<i>``) before anything is stored."""
    tree_id = imported_tree_id(document.tree_id)
    ids = {n.id: derive_id("imported-node", tree_id, n.id) for n in document.nodes}
    if len(ids) != len(document.nodes):
        raise ContextError("two nodes share an id", field="nodes")
    state = TreeState(tree_id)
    out: list[ContextNode] = []
    for i, node in enumerate(document.nodes):
        if node.tree_id != document.tree_id:
            raise ContextError(
                "belongs to another tree than the document's tree_id", field=f"nodes.{i}.tree_id"
            )
        refs = {}
        for name in ("parent_id", "supersedes", "target"):
            value = getattr(node, name)
            if value is not None:
                if value not in ids:
                    raise ContextError(
                        "refers to a node the document does not hold", field=f"nodes.{i}.{name}"
                    )
                refs[name] = ids[value]
        tree = None
        if node.tree is not None:
            tree = node.tree.model_copy(
                update={
                    "kind": "tree",
                    "participants": [],
                    "ref": {**node.tree.ref, "imported_from": document.tree_id},
                }
            )
        moved = node.model_copy(update={"id": ids[node.id], "tree_id": tree_id, "tree": tree, **refs})
        if i == 0 and not moved.is_root:
            raise ContextError("the first node must be the tree's root", field="nodes.0")
        try:
            check_append(state, moved)
        except LoomError as exc:
            raise ContextError(str(exc).split(": ", 1)[-1], field=f"nodes.{i}") from None
        state.add(moved, i + 1)
        out.append(moved)
    return state, out
