"""Export and import of a context tree, the pure part (shared.context.transfer)."""

from __future__ import annotations

import pytest

from shared.context.reads import structure
from shared.context.transfer import TreeExport, export_tree, imported_tree_id, rehome
from shared.context.trees import (
    DELETION,
    ContextError,
    ContextNode,
    TreeMeta,
    TreeState,
    check_append,
    update_of,
)

A = "a" * 32
TREE = "1" * 32
SECRET = "ghp_" + "Q" * 36


def _state() -> tuple[TreeState, list[str]]:
    state = TreeState(TREE)
    seq = 0

    def add(node: ContextNode) -> str:
        nonlocal seq
        check_append(state, node)
        seq += 1
        state.add(node, seq)
        return node.id

    root = add(
        ContextNode(tree_id=TREE, author=A, kind="root", text="plan", tree=TreeMeta(kind="work", title="t"))
    )
    one = add(ContextNode(tree_id=TREE, parent_id=root, author=A, text=f"see {SECRET}"))
    two = add(ContextNode(tree_id=TREE, parent_id=one, author=A, text="two"))
    add(update_of(state, one, None, author=A, text="one v2"))
    add(ContextNode(tree_id=TREE, parent_id=two, target=two, kind="tombstone", author=A))
    add(
        ContextNode(
            tree_id=TREE,
            parent_id=root,
            kind=DELETION,
            author=A,
            meta={"purge_after": "2030-01-01T00:00:00+00:00"},
        )
    )
    return state, [root, one, two]


def test_an_export_imports_as_the_same_history_under_new_ids() -> None:
    state, _ = _state()
    document = TreeExport.model_validate_json(export_tree(state).model_dump_json())
    assert len(document.nodes) == 5  # the deletion mark stays behind
    assert document.warnings == ["nodes.1.text: possible GitHub token at character 4"]
    assert all(SECRET not in w for w in document.warnings)
    copy, nodes = rehome(document)
    assert copy.tree_id == imported_tree_id(TREE) != TREE
    assert {n.id for n in nodes}.isdisjoint(state.nodes)
    assert [r.kind for r in structure(copy)[0]] == [r.kind for r in structure(state)[0]]
    assert [n.text for n in copy.path_at(copy.order[1], None)] == ["plan", "one v2"]
    assert copy.meta.kind == "tree" and copy.meta.ref == {"imported_from": TREE}
    # a second import of the same document names the same ids
    assert [n.id for n in rehome(document)[1]] == [n.id for n in nodes]


def test_a_document_that_does_not_hold_together_is_refused_naming_the_node() -> None:
    state, ids = _state()
    document = export_tree(state)
    dangling = document.model_copy(update={"nodes": [document.nodes[0], document.nodes[2]]})
    with pytest.raises(ContextError) as missing:
        rehome(dangling)
    assert missing.value.field == "nodes.1.parent_id"
    headless = document.model_copy(update={"nodes": document.nodes[1:]})
    with pytest.raises(ContextError) as first:
        rehome(headless)
    assert first.value.field is not None and first.value.field.startswith("nodes.0")
    twice = document.model_copy(update={"nodes": [*document.nodes, document.nodes[1]]})
    with pytest.raises(ContextError) as shared_id:
        rehome(twice)
    assert shared_id.value.field == "nodes"
    stray = document.nodes[1].model_copy(update={"tree_id": "2" * 32})
    foreign = document.model_copy(update={"nodes": [document.nodes[0], stray]})
    with pytest.raises(ContextError) as other_tree:
        rehome(foreign)
    assert other_tree.value.field == "nodes.1.tree_id"
    assert ids  # the tree the document came from is untouched
