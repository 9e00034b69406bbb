"""Time travel, leaves, tree metadata, staged deletion and the depth limit, on the pure
model (shared.context.trees, shared.context.reads): no NATS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from shared.context import trees
from shared.context.reads import in_tree_order, leaves, structure
from shared.context.trees import (
    DELETION,
    RESTORE,
    ContextConflict,
    ContextError,
    ContextNode,
    ContextNotFound,
    TreeChange,
    TreeMeta,
    TreeState,
    changed_meta,
    check_append,
    deletion,
    node_input,
    update_of,
    upto_of,
)

A = "a" * 32
TREE = "1" * 32
T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Builder:
    def __init__(self) -> None:
        self.state = TreeState(TREE)
        self.seq = 0
        self.root = self.add(
            ContextNode(tree_id=TREE, author=A, kind="root", text="task", tree=TreeMeta(title="t"))
        )

    def add(self, node: ContextNode) -> str:
        check_append(self.state, node)
        self.seq += 1
        self.state.add(node, self.seq)
        return node.id

    def child(self, parent: str, text: str = "x") -> str:
        at = T0 + timedelta(minutes=self.seq)
        return self.add(ContextNode(tree_id=TREE, parent_id=parent, author=A, text=text, at=at))

    def update(self, node_id: str, text: str) -> str:
        node = update_of(self.state, node_id, None, author=A, text=text)
        return self.add(node.model_copy(update={"at": T0 + timedelta(minutes=self.seq)}))

    def tombstone(self, node_id: str) -> str:
        return self.add(
            ContextNode(tree_id=TREE, parent_id=node_id, target=node_id, kind="tombstone", author=A)
        )


def test_a_read_as_of_a_sequence_shows_the_tree_as_it_stood() -> None:
    b = Builder()
    one = b.child(b.root, "one v1")  # seq 2
    two = b.child(one, "two")  # seq 3
    at_three = b.seq
    b.update(one, "one v2")  # seq 4
    b.tombstone(two)  # seq 5
    late = b.child(b.root, "late")  # seq 6
    state = b.state
    # now: the new version, the tombstone hides two, late is there
    assert [n.text for n in state.path_at(one, None)] == ["task", "one v2"]
    refs, _ = structure(state)
    assert [r.id for r in refs] == [b.root, one, late]
    # as of seq 3: the first version, two visible, late absent
    assert [n.text for n in state.path_at(two, at_three)] == ["task", "one v1", "two"]
    past, _ = structure(state, upto=at_three)
    assert [(r.id, r.updated, r.children) for r in past] == [
        (b.root, False, 1),
        (one, False, 1),
        (two, False, 0),
    ]
    page, _ = in_tree_order(state, upto=at_three)
    assert [n.text for n, _ in page] == ["task", "one v1", "two"]
    with pytest.raises(ContextNotFound) as absent:
        state.path_at(late, at_three)
    assert absent.value.field == "node_id"
    # tombstoned since: hidden now, visible then
    with pytest.raises(ContextNotFound):
        state.path_at(two, None)
    assert state.path_at(two, 4)[-1].text == "two"


def test_as_of_a_time_and_its_refusals() -> None:
    b = Builder()
    one = b.child(b.root, "one v1")
    b.update(one, "one v2")
    when = b.state.nodes[b.state.current[one]].at
    assert upto_of(b.state, None, when - timedelta(seconds=1)) == 2
    assert upto_of(b.state, None, when) == 3
    assert upto_of(b.state, None, None) is None
    with pytest.raises(ContextError) as both:
        upto_of(b.state, 2, when)
    assert both.value.field == "as_of"
    with pytest.raises(ContextError) as naive:
        upto_of(b.state, None, datetime(2026, 11, 1))
    assert naive.value.field == "as_of" and "time zone" in str(naive.value)
    with pytest.raises(ContextNotFound) as before:
        upto_of(b.state, None, datetime(2000, 1, 1, tzinfo=UTC))
    assert before.value.field == "as_of"


def test_leaves_are_the_ends_of_visible_branches() -> None:
    b = Builder()
    one = b.child(b.root)
    two = b.child(one)
    three = b.child(one)
    four = b.child(b.root)
    assert [r.id for r in leaves(b.state)[0]] == [two, three, four]
    b.tombstone(three)
    b.tombstone(four)
    assert [r.id for r in leaves(b.state)[0]] == [two]
    assert [r.id for r in leaves(b.state, upto=5)[0]] == [two, three, four]
    found, more = leaves(b.state, include_hidden=True, limit=2)
    assert [r.id for r in found] == [two, three] and more


def test_tree_metadata_changes_as_a_new_version_of_the_root() -> None:
    b = Builder()
    meta = changed_meta(b.state.meta, TreeChange(title="parser", description="the PEG attempt"))
    assert (meta.title, meta.description, meta.kind) == ("parser", "the PEG attempt", "tree")
    b.add(update_of(b.state, b.root, None, author=A, tree=meta))
    assert b.state.meta.title == "parser"
    assert b.state.path(b.root)[0].tree == meta
    # kind and participants are not changeable; a work tree keeps its ref
    with pytest.raises(ValidationError):
        TreeChange.model_validate({"kind": "work"})
    work = TreeMeta(kind="work", ref={"work_id": "f" * 32})
    with pytest.raises(ContextError) as ref:
        changed_meta(work, TreeChange(ref={"work_id": "e" * 32}))
    assert ref.value.field == "ref"


def test_a_deletion_is_staged_and_can_be_undone() -> None:
    b = Builder()
    kid = b.child(b.root)
    due = (T0 + timedelta(days=7)).isoformat()
    b.add(ContextNode(tree_id=TREE, parent_id=b.root, kind=DELETION, author=A, meta={"purge_after": due}))
    mark = deletion(b.state)
    assert mark is not None and mark.meta["purge_after"] == due
    # the mark is not a node of the tree
    assert [r.id for r in structure(b.state)[0]] == [b.root, kid]
    with pytest.raises(ContextConflict) as frozen:
        b.child(kid)
    assert (frozen.value.field, str(frozen.value)) == (
        "tree_id",
        "tree_id: is scheduled for deletion; restore it first",
    )
    with pytest.raises(ContextConflict):
        b.add(ContextNode(tree_id=TREE, parent_id=b.root, kind=DELETION, author=A, meta={"purge_after": due}))
    b.add(ContextNode(tree_id=TREE, parent_id=b.root, kind=RESTORE, author=A))
    assert deletion(b.state) is None
    b.child(kid)  # writable again
    with pytest.raises(ContextConflict) as twice:
        b.add(ContextNode(tree_id=TREE, parent_id=b.root, kind=RESTORE, author=A))
    assert str(twice.value) == "tree_id: is not scheduled for deletion"
    # callers cannot forge the marks as ordinary nodes
    with pytest.raises(ContextError) as forged:
        node_input(parent_id=b.root, kind=DELETION, text="x")
    assert forged.value.field == "kind"


def test_the_depth_limit_names_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trees, "MAX_DEPTH", 3)
    b = Builder()
    at = b.root
    for _ in range(3):
        at = b.child(at)
    assert b.state.depths[at] == 3
    with pytest.raises(ContextConflict) as deep:
        b.child(at)
    assert deep.value.field == "parent_id" and "deepest level a tree may have (3 below the root)" in str(
        deep.value
    )


def test_a_handle_names_any_source_system_with_version_and_metadata() -> None:
    from shared.context.trees import ContextHandle, NodeInput

    handle = ContextHandle(
        source="s3",
        id="bucket/reports/q3.pdf",
        version="3HL4kqtJlcpXroDTDmJ",
        metadata={"content_type": "application/pdf"},
    )
    node = NodeInput(parent_id=A, kind="report", handle=handle)
    again = NodeInput.model_validate_json(node.model_dump_json())
    assert again.handle == handle and again.handle.metadata == {"content_type": "application/pdf"}
    # Loom's own sources keep their rules; a name that is not a source name is refused unechoed
    secret = "ghp_" + "Q" * 36
    for bad in (
        {"source": secret, "id": "x"},
        {"source": "Postgres", "id": "x"},
        {"source": "s3", "id": ""},
        {"source": "loom-work", "id": "not-an-id"},
    ):
        with pytest.raises(ContextError) as refused:
            node_input(parent_id=A, handle=bad)
        assert refused.value.field is not None and refused.value.field.startswith("handle")
        assert secret not in str(refused.value)
