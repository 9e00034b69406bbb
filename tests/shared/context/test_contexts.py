"""Context trees, the pure model (shared.context.trees): no NATS."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.context.reads import hand_off, in_tree_order, structure
from shared.context.trees import (
    MAX_STRUCTURE,
    ContextConflict,
    ContextError,
    ContextHandle,
    ContextNode,
    ContextNotFound,
    HandleSource,
    NodeInput,
    TreeMeta,
    TreeState,
    check_append,
    derive_id,
    readable,
    update_of,
    work_attempt_id,
    work_root_id,
)
from shared.models import Scope
from shared.paging import CursorError

A = "a" * 32
B = "b" * 32
TREE = "1" * 32


class Builder:
    """Appends nodes the way the store does: checked, then applied with the next sequence."""

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

    def child(self, parent: str, text: str = "x", **kw: object) -> str:
        return self.add(ContextNode(tree_id=TREE, parent_id=parent, author=A, text=text, **kw))  # type: ignore[arg-type]


def test_path_children_and_branches() -> None:
    b = Builder()
    one = b.child(b.root, "one")
    two = b.child(one, "two")
    branch = b.child(one, "branch")
    assert [n.text for n in b.state.path(two)] == ["task", "one", "two"]
    assert [n.text for n in b.state.path(branch)] == ["task", "one", "branch"]
    refs, cursor = structure(b.state)
    assert [(r.id, r.depth, r.children) for r in refs] == [
        (b.root, 0, 1),
        (one, 1, 2),
        (two, 2, 0),
        (branch, 2, 0),
    ]
    assert cursor is None
    assert not any(hasattr(r, "text") for r in refs)  # structure never carries content


def test_deep_path_is_root_first() -> None:
    b = Builder()
    at = b.root
    for i in range(1000):
        at = b.child(at, str(i))
    path = b.state.path(at)
    assert len(path) == 1001 and path[0].id == b.root and path[-1].text == "999"


def test_update_supersedes_and_keeps_children() -> None:
    b = Builder()
    one = b.child(b.root, "first draft")
    kid = b.child(one, "kid")
    newer = update_of(b.state, one, NodeInput(parent_id=b.root, text="second draft"), author=B)
    b.add(newer)
    assert newer.supersedes == one and newer.parent_id == b.root
    assert [n.text for n in b.state.path(kid)] == ["task", "second draft", "kid"]
    assert b.state.nodes[one].text == "first draft"  # the original stays stored
    ref = structure(b.state)[0][1]
    assert ref.id == one and ref.version == newer.id and ref.updated
    # an update of an outdated version is refused, naming the field
    stale = update_of(b.state, one, None, author=B).model_copy(update={"supersedes": one})
    with pytest.raises(ContextConflict) as err:
        check_append(b.state, stale)
    assert err.value.field == "node_id"
    # appending under any version lands under the same node
    b.child(newer.id, "under new")
    assert [r.id for r in structure(b.state, one)[0]][1:] == [kid, b.state.children[one][1]]


def test_tombstone_hides_subtree_and_keeps_history() -> None:
    b = Builder()
    one = b.child(b.root, "one")
    kid = b.child(one, "kid")
    other = b.child(b.root, "other")
    b.add(ContextNode(tree_id=TREE, parent_id=one, target=one, kind="tombstone", author=A))
    assert [r.id for r in structure(b.state)[0]] == [b.root, other]
    assert [r.id for r in structure(b.state, include_hidden=True)[0]] == [b.root, one, kid, other]
    with pytest.raises(ContextNotFound) as err:
        b.state.path(kid)
    assert err.value.field == "node_id" and "tombstoned" in err.value.message
    assert [n.id for n in b.state.path(kid, include_hidden=True)] == [b.root, one, kid]
    with pytest.raises(ContextConflict) as conflict:
        check_append(b.state, ContextNode(tree_id=TREE, parent_id=kid, author=A, text="late"))
    assert conflict.value.field == "parent_id"
    with pytest.raises(ContextConflict):
        check_append(
            b.state, ContextNode(tree_id=TREE, parent_id=one, target=one, kind="tombstone", author=A)
        )
    assert kid in b.state.nodes  # history kept


def test_unknown_parent_and_missing_tree_are_named() -> None:
    b = Builder()
    with pytest.raises(ContextNotFound) as err:
        check_append(b.state, ContextNode(tree_id=TREE, parent_id=B, author=A, text="x"))
    assert err.value.field == "parent_id" and B not in err.value.message
    with pytest.raises(ContextNotFound) as missing:
        check_append(TreeState(TREE), ContextNode(tree_id=TREE, parent_id=B, author=A))
    assert missing.value.field == "tree_id"
    with pytest.raises(ContextConflict):
        check_append(b.state, ContextNode(tree_id=TREE, author=A, tree=TreeMeta()))


def test_orphans_wait_for_their_parent() -> None:
    state = TreeState(TREE)
    root = ContextNode(tree_id=TREE, author=A, tree=TreeMeta())
    mid = ContextNode(tree_id=TREE, parent_id=root.id, author=A)
    leaf = ContextNode(tree_id=TREE, parent_id=mid.id, author=A)
    state.add(leaf, 3)
    state.add(mid, 2)
    assert not state.exists
    state.add(root, 1)
    assert [n.id for n in state.path(leaf.id)] == [root.id, mid.id, leaf.id]
    state.add(leaf, 3)  # idempotent
    assert state.size == 3


def test_paging_is_consistent_while_the_tree_grows() -> None:
    b = Builder()
    ids = [b.child(b.root, str(i)) for i in range(5)]
    page, cursor = in_tree_order(b.state, limit=3)
    assert [n.id for n, _ in page] == [b.root, *ids[:2]]
    b.child(b.root, "late")  # stored after the first page: not part of this read
    rest, end = in_tree_order(b.state, limit=3, cursor=cursor)
    assert [n.id for n, _ in rest] == ids[2:] and end is None
    with pytest.raises(CursorError):
        in_tree_order(b.state, cursor="garbage!")
    other = TreeState("2" * 32)
    other.add(ContextNode(tree_id="2" * 32, author=A, tree=TreeMeta()), 1)
    with pytest.raises(CursorError):
        in_tree_order(other, cursor=cursor)  # a cursor of another tree
    with pytest.raises(ContextError) as err:
        structure(b.state, limit=MAX_STRUCTURE + 1)
    assert err.value.field == "limit"


def test_hand_off_is_newest_first_and_bounded() -> None:
    b = Builder()
    for i in range(30):
        b.child(b.root, f"note {i} " + "y" * 3000)
    first = hand_off(b.state, limit=5, max_chars=100_000, node_chars=50)
    assert [n.text.split()[1] for n in first.nodes if n.text] == ["29", "28", "27", "26", "25"]
    assert first.truncated == 5 and all(len(n.text or "") <= 50 for n in first.nodes)
    assert first.total == 31 and first.next_cursor
    bounded = hand_off(b.state, limit=30, max_chars=4000, node_chars=2000)
    assert len(bounded.nodes) == 2  # the size bound, not the count, ended this page
    tail = hand_off(b.state, limit=100, cursor=first.next_cursor, max_chars=10**9)
    assert tail.nodes[-1].id == b.root and tail.next_cursor is None


def test_handles_are_validated_without_echo() -> None:
    ContextHandle(source=HandleSource.GIT, id="src/app.py", version="0a1b2c3d")
    ContextHandle(source=HandleSource.CHANNEL, id="roadmap/12")
    ContextHandle(source=HandleSource.URL, id="https://example.org/x")
    secret = "ghp_" + "Z" * 36
    for source, ident, version in [
        (HandleSource.GIT, "a.py", secret),
        (HandleSource.WORK, secret, None),
        (HandleSource.CHANNEL, secret, None),
        (HandleSource.CONTEXT, f"{A}/{secret}", None),
        (HandleSource.URL, secret, None),
        (HandleSource.INLINE, secret, None),
        (HandleSource.FILE, "", None),
    ]:
        with pytest.raises(ValidationError) as err:
            ContextHandle(source=source, id=ident, version=version)
        assert secret not in str(err.value.errors(include_input=False))


def test_node_input_rules() -> None:
    with pytest.raises(ValidationError, match="required with an inline handle"):
        NodeInput(parent_id=A)
    with pytest.raises(ValidationError, match="reserved"):
        NodeInput(parent_id=A, kind="tombstone", text="x")
    with pytest.raises(ValidationError):
        NodeInput(parent_id="nope", text="x")
    with pytest.raises(ValidationError):
        NodeInput(parent_id=A, text="x", meta={f"k{i}": "v" for i in range(40)})
    NodeInput(parent_id=A, handle=ContextHandle(source=HandleSource.WORK, id=B))


def test_scope_of_content_and_derived_ids() -> None:
    node = ContextNode(tree_id=TREE, author=A, author_user="u" * 16, scope=Scope.PRIVATE)
    assert readable(node, agent_id=A, user_id="x") and not readable(node, agent_id=B, user_id="x")
    personal = node.model_copy(update={"scope": Scope.PERSONAL})
    assert readable(personal, agent_id=B, user_id="u" * 16) and not readable(
        personal, agent_id=B, user_id="v"
    )
    assert work_root_id(A) == work_root_id(A) != work_attempt_id(A, 1) != work_attempt_id(A, 2)
    assert len(derive_id("x", 1)) == 32


def test_kept_structure_matches_a_fresh_one_as_the_tree_grows() -> None:
    """The whole-tree structure is kept and grown node by node; after every kind of change
    it must equal what a fresh walk gives."""
    import random

    from shared.context.reads import _subtree

    rng = random.Random(7)
    b = Builder()
    ids = [b.root]
    structure(b.state, limit=MAX_STRUCTURE)  # keep it from here on
    for step in range(400):
        roll = rng.random()
        live = [i for i in ids if not b.state.hidden(i)]
        if roll < 0.85 or len(live) < 5:
            ids.append(b.child(rng.choice(live), str(step)))
        elif roll < 0.93:
            victim = rng.choice(live[1:])
            b.add(ContextNode(tree_id=TREE, parent_id=victim, target=victim, kind="tombstone", author=A))
        else:
            target = rng.choice(live)
            b.add(update_of(b.state, b.state.current[target], None, author=B))
        kept, _ = structure(b.state, limit=MAX_STRUCTURE)
        fresh = _subtree(b.state, b.root, None, False, b.state.last_seq)
        assert kept == fresh, step
