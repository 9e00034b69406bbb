"""Context trees on a real nats-server (shared.context.store)."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NatsClient

from shared.channels import Viewer
from shared.context.reads import structure
from shared.context.store import ContextStore
from shared.context.trees import (
    ContextConflict,
    ContextHandle,
    ContextNotFound,
    HandleSource,
    NodeInput,
    TreeMeta,
)
from shared.models import Scope, WorkSubmission
from shared.names import ProjectNames
from shared.paging import CursorError
from testsupport.work import work_queue

A = "a" * 32
B = "b" * 32


async def test_create_append_path_and_structure(nc: NatsClient, project_id: str) -> None:
    store = ContextStore(nc, ProjectNames(project_id))
    state, root, created = await store.create_tree(TreeMeta(title="plan"), author=A, text="the plan")
    assert created and root.tree is not None and root.tree.title == "plan"
    one = await store.append(state.tree_id, NodeInput(parent_id=root.id, text="step 1"), author=A)
    two = await store.append(state.tree_id, NodeInput(parent_id=one.id, text="step 2"), author=B)
    alt = await store.append(state.tree_id, NodeInput(parent_id=one.id, text="other way"), author=B)
    # a second store (another process) sees the same tree from the stream alone
    other = ContextStore(nc, ProjectNames(project_id))
    seen = await other.existing(state.tree_id)
    assert [n.text for n in seen.path(two.id)] == ["the plan", "step 1", "step 2"]
    refs, _ = structure(seen)
    assert [r.id for r in refs] == [root.id, one.id, two.id, alt.id]
    # the index lists it
    assert [e.tree_id for e in await other.entries("tree.*")] == [state.tree_id]


async def test_cached_copy_catches_up_with_other_writers(nc: NatsClient, project_id: str) -> None:
    mine = ContextStore(nc, ProjectNames(project_id))
    theirs = ContextStore(nc, ProjectNames(project_id))
    state, root, _ = await mine.create_tree(TreeMeta(), author=A, text="r")
    await mine.tree(state.tree_id)
    added = await theirs.append(state.tree_id, NodeInput(parent_id=root.id, text="from b"), author=B)
    again = await mine.tree(state.tree_id)
    assert added.id in again.nodes and again.path(added.id)[-1].text == "from b"


async def test_refusals_name_the_field(nc: NatsClient, project_id: str) -> None:
    store = ContextStore(nc, ProjectNames(project_id))
    with pytest.raises(ContextNotFound) as missing:
        await store.append("c" * 32, NodeInput(parent_id=A, text="x"), author=A)
    assert missing.value.field == "tree_id"
    state, root, _ = await store.create_tree(TreeMeta(), author=A, text="r")
    with pytest.raises(ContextNotFound) as parent:
        await store.append(state.tree_id, NodeInput(parent_id=B, text="x"), author=A)
    assert parent.value.field == "parent_id"
    kid = await store.append(state.tree_id, NodeInput(parent_id=root.id, text="x"), author=A)
    await store.tombstone(state.tree_id, kid.id, author=A, reason="wrong turn")
    with pytest.raises(ContextConflict) as hidden:
        await store.append(state.tree_id, NodeInput(parent_id=kid.id, text="y"), author=A)
    assert hidden.value.field == "parent_id"
    with pytest.raises(CursorError):
        await store.changes(state.tree_id, cursor="bogus!")


async def test_derived_trees_are_created_once(nc: NatsClient, project_id: str) -> None:
    a = ContextStore(nc, ProjectNames(project_id))
    b = ContextStore(nc, ProjectNames(project_id))
    meta = TreeMeta(kind="thread", ref={"channel": "roadmap", "seq": "4"})
    tree_id, root_id = "d" * 32, "e" * 32
    _, _, first = await a.create_tree(meta, author=A, tree_id=tree_id, root_id=root_id, text="root")
    _, root, second = await b.create_tree(meta, author=B, tree_id=tree_id, root_id=root_id, text="root")
    assert first and not second and root.author == A
    assert [e.tree_id for e in await a.entries("thread.roadmap.*")] == [tree_id]
    assert (await a.tree(tree_id)).size == 1


async def test_changes_since_a_cursor(nc: NatsClient, project_id: str) -> None:
    store = ContextStore(nc, ProjectNames(project_id))
    state, root, _ = await store.create_tree(TreeMeta(), author=A, text="r")
    changes, cursor = await store.changes(state.tree_id)
    assert [c.node.id for c in changes] == [root.id]
    nothing, same = await store.changes(state.tree_id, cursor=cursor)
    assert nothing == [] and same == cursor
    node = await store.append(state.tree_id, NodeInput(parent_id=root.id, text="new"), author=A)
    fresh, _ = await store.changes(state.tree_id, cursor=cursor)
    assert [c.node.id for c in fresh] == [node.id]
    everything, _ = await store.changes(None)
    assert {c.node.id for c in everything} >= {root.id, node.id}


async def test_resolve_loom_handles(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    store = ContextStore(nc, names)
    queue = work_queue(nc, names)
    item = await queue.submit(
        WorkSubmission(task_id="t", description="d", capability="code"), submitted_by="tester"
    )
    state, root, _ = await store.create_tree(TreeMeta(), author=A, text="root text")
    work = await store.append(
        state.tree_id,
        NodeInput(parent_id=root.id, kind="ref", handle=ContextHandle(source=HandleSource.WORK, id=item.id)),
        author=A,
    )
    url = await store.append(
        state.tree_id,
        NodeInput(parent_id=root.id, handle=ContextHandle(source=HandleSource.URL, id="https://example.org")),
        author=A,
    )
    secret = await store.append(
        state.tree_id, NodeInput(parent_id=root.id, text="mine only", scope=Scope.PRIVATE), author=A
    )
    current = await store.tree(state.tree_id)
    done = await store.resolve(
        current, [root.id, work.id, url.id, secret.id], Viewer(agent_id=B, user_id="u")
    )
    assert done[0].resolved and done[0].content == "root text"
    assert done[1].resolved and done[1].content["id"] == item.id
    assert not done[2].resolved and "not a Loom source" in (done[2].reason or "")
    assert not done[3].resolved and "not visible" in (done[3].reason or "")
    with pytest.raises(ContextNotFound) as err:
        await store.resolve(current, [B])
    assert err.value.field == "node_ids"


async def test_tree_metadata_changes_are_compare_and_set(nc: NatsClient, project_id: str) -> None:
    from shared.context.trees import TreeChange

    store = ContextStore(nc, ProjectNames(project_id))
    state, root, _ = await store.create_tree(TreeMeta(title="plan"), author=A, text="r")
    # two writers (two Weft replicas) change the title at once: both land, one after the other
    other = ContextStore(nc, ProjectNames(project_id))
    await asyncio.gather(
        store.update_tree(state.tree_id, TreeChange(title="first"), author=A),
        other.update_tree(state.tree_id, TreeChange(description="why"), author=B),
    )
    seen = await ContextStore(nc, ProjectNames(project_id)).existing(state.tree_id)
    assert seen.meta.description == "why" and seen.meta.title == "first"
    assert len(seen.versions[root.id]) == 3  # the root and two versions of it
    # the listing follows
    [entry] = await store.entries("tree.*")
    assert (entry.title, entry.description) == ("first", "why")


async def test_a_deleted_tree_is_frozen_restorable_then_purged(nc: NatsClient, project_id: str) -> None:
    from datetime import timedelta

    from shared.context.trees import deletion
    from shared.models import utcnow

    store = ContextStore(nc, ProjectNames(project_id))
    state, root, _ = await store.create_tree(TreeMeta(title="plan"), author=A, text="r")
    now = utcnow()
    _, mark = await store.schedule_deletion(state.tree_id, window_s=60, author=A, now=now)
    assert mark.meta["purge_after"] == (now + timedelta(seconds=60)).isoformat()
    [entry] = await store.entries("tree.*")
    assert entry.deleting is not None and entry.deleting.by == A
    with pytest.raises(ContextConflict) as frozen:
        await store.append(state.tree_id, NodeInput(parent_id=root.id, text="x"), author=A)
    assert frozen.value.field == "tree_id"
    with pytest.raises(ContextConflict):
        await store.schedule_deletion(state.tree_id, window_s=60, author=A, now=now)
    # not due yet: kept
    assert not await store.purge_if_due(state.tree_id, now)
    restored = await store.restore(state.tree_id, author=B)
    assert deletion(restored) is None
    [entry] = await store.entries("tree.*")
    assert entry.deleting is None
    await store.append(state.tree_id, NodeInput(parent_id=root.id, text="x"), author=A)
    # deleted again and due: purged, the listing goes too
    await store.schedule_deletion(state.tree_id, window_s=0, author=A, now=now)
    assert await store.purge_if_due(state.tree_id, now)
    assert await store.entries("tree.*") == []
    with pytest.raises(ContextNotFound):
        await ContextStore(nc, ProjectNames(project_id)).existing(state.tree_id)


async def test_a_work_tree_is_not_deleted_by_hand(nc: NatsClient, project_id: str) -> None:
    from shared.models import utcnow

    store = ContextStore(nc, ProjectNames(project_id))
    state, _, _ = await store.create_tree(TreeMeta(kind="work", ref={"work_id": A}), author=A, listed=False)
    with pytest.raises(ContextConflict) as refused:
        await store.schedule_deletion(state.tree_id, window_s=0, author=A, now=utcnow())
    assert refused.value.field == "tree_id" and "removed with its record" in str(refused.value)
