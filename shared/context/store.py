"""Context trees on JetStream (docs/context.md, Storage).

Layout (names from :class:`shared.names.ProjectNames`):

* one stream per project, ``LOOM-<p>-CTX``, with **one subject per tree**
  (``loom.<p>.ctx.<tree>``) and **one message per node**: nodes are immutable, so a
  tree is exactly the messages on its subject, in stream order. Each node is published
  with its id as ``Nats-Msg-Id``, so a retried append (or two writers of a derived id)
  stores one copy;
* a KV bucket ``loom-<p>-contexts`` that lists trees for browsing (threads of a
  channel, trees agents created); work trees are found by their work id and need no
  entry. A tree is described by its root node, never by the index.

Reads are served from an in-process copy of each tree used recently
(:class:`shared.context.trees.TreeState`, least recently used dropped beyond a bound):
before every read the copy catches up with **one** batched direct get of the tree's
subject from the last sequence it holds, so a path at depth 1,000 or the structure
of 10,000 nodes costs one round trip (which returns nothing new when nothing changed)
plus work in memory. The copy only advances over what it has read from the stream,
in order, so a replica that answers a moment behind can delay a node but never make
the copy skip one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.kv import KeyValue
from pydantic import ValidationError

from shared.base import AnyJson, LoomModel
from shared.channels import Viewer, visible
from shared.context.reads import Deleting
from shared.context.transfer import TreeExport, rehome
from shared.context.trees import (
    DELETION,
    LOOM_SOURCES,
    MAX_NODES_PER_TREE,
    MAX_PAGE,
    RESTORE,
    TOMBSTONE,
    ContextConflict,
    ContextError,
    ContextHandle,
    ContextNode,
    HandleSource,
    NodeInput,
    TreeChange,
    TreeMeta,
    TreeState,
    changed_meta,
    check_append,
    deletion,
    purge_after,
    readable,
    tree_missing,
    update_of,
)
from shared.models import Scope, utcnow
from shared.names import ProjectNames, validate_channel
from shared.nats.jetstream import (
    create_if_absent,
    delete_unchanged,
    ensure_kv,
    ensure_stream,
    get_or_none,
    publish_unchanged,
    snapshot_keys,
    update_unchanged,
)
from shared.nats.jsapi import JetStreamReplyError, direct_get_batch
from shared.paging import CursorError, Page, decode_cursor, encode_cursor

log = logging.getLogger("loom.contexts")

READ_BATCH = 1000
"""Nodes per direct-get request while a copy catches up."""
CACHE_NODES = 250_000
"""Nodes the in-process copies hold at most (least recently used trees dropped first)."""
INDEX_TREE = "tree"
INDEX_THREAD = "thread"
INDEX_DM = "dm"
CAS_TRIES = 8
"""Attempts of a tree-level change (metadata, deletion) that other writers keep beating."""


class TreeEntry(LoomModel):
    """A tree as listed in the index bucket."""

    tree_id: str
    kind: str
    title: str = ""
    description: str = ""
    ref: dict[str, str] = {}
    participants: list[str] = []
    created_by: str
    created_at: datetime
    deleting: Deleting | None = None

    @classmethod
    def of(cls, meta: TreeMeta, tree_id: str, *, created_by: str, created_at: datetime) -> TreeEntry:
        """A tree's listing as its metadata describes it."""
        return cls(
            tree_id=tree_id,
            kind=meta.kind,
            title=meta.title,
            description=meta.description,
            ref=meta.ref,
            participants=meta.participants,
            created_by=created_by,
            created_at=created_at,
        )


def index_key(meta: TreeMeta, tree_id: str) -> str:
    if meta.kind == "thread":
        return f"{INDEX_THREAD}.{validate_channel(meta.ref.get('channel'), 'channel')}.{tree_id}"
    if meta.kind == "dm-thread":
        return f"{INDEX_DM}.{tree_id}"
    return f"{INDEX_TREE}.{tree_id}"


@dataclass
class Resolved:
    node_id: str
    source: str
    id: str
    version: str | None
    resolved: bool
    content: AnyJson = None
    reason: str | None = None


@dataclass
class Change:
    seq: int
    node: ContextNode


class ContextStore:
    """Every context tree of one project."""

    def __init__(
        self,
        nc: NatsClient,
        names: ProjectNames,
        *,
        js: JetStreamContext | None = None,
        timeout: float = 5.0,
        cache_nodes: int = CACHE_NODES,
    ) -> None:
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names
        self._timeout = timeout
        self._cache: OrderedDict[str, TreeState] = OrderedDict()
        self._cached_nodes = 0
        self._cache_limit = cache_nodes
        self._locks: dict[str, asyncio.Lock] = {}
        self._ensured = False
        self._ensure_lock = asyncio.Lock()
        self._index: KeyValue | None = None

    # -- set-up -------------------------------------------------------------------------
    def stream_config(self) -> StreamConfig:
        return StreamConfig(
            name=self.names.context_stream,
            description="Loom context trees (one subject per tree, one message per node)",
            subjects=[self.names.context_subjects],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_msgs_per_subject=MAX_NODES_PER_TREE,
            discard=DiscardPolicy.NEW,
            discard_new_per_subject=True,
            allow_direct=True,
            duplicate_window=120,
        )

    async def ensure(self) -> None:
        if self._ensured:
            return
        async with self._ensure_lock:
            if self._ensured:
                return
            await ensure_stream(self._js, self.stream_config())
            self._index = await ensure_kv(
                self._js, self.names.contexts_bucket, description="Loom context trees"
            )
            self._ensured = True

    def forget(self) -> None:
        """After a reconnect (the server may be a fresh one): check the stream again, drop the copies."""
        self._ensured = False
        self._cache.clear()
        self._cached_nodes = 0

    async def index(self) -> KeyValue:
        await self.ensure()
        assert self._index is not None
        return self._index

    # -- the copies -----------------------------------------------------------------------
    async def tree(self, tree_id: str) -> TreeState:
        """The tree as stored now (one round trip when the copy is current)."""
        subject = self.names.context_subject(tree_id)
        await self.ensure()
        lock = self._locks.setdefault(tree_id, asyncio.Lock())
        async with lock:
            state = self._cache.get(tree_id)
            if state is None:
                state = TreeState(tree_id)
            before = state.size
            await self._catch_up(state, subject)
            self._keep(state, state.size - before)
        return state

    async def existing(self, tree_id: str) -> TreeState:
        state = await self.tree(tree_id)
        if not state.exists:
            raise tree_missing()
        return state

    async def _catch_up(self, state: TreeState, subject: str) -> None:
        while True:
            try:
                batch = await direct_get_batch(
                    self._nc,
                    self.names.context_stream,
                    start_seq=state.last_seq + 1,
                    batch=READ_BATCH,
                    subject=subject,
                    timeout=self._timeout,
                )
            except JetStreamReplyError as exc:
                if exc.status == "408":  # nothing stored past this sequence
                    return
                raise
            for stored in batch:
                try:
                    node = ContextNode.model_validate_json(stored.data)
                except ValidationError:
                    log.warning("context %s: skipping unreadable node at seq %s", state.tree_id, stored.seq)
                    state.last_seq = max(state.last_seq, stored.seq)
                    continue
                state.add(node, stored.seq)
            if len(batch) < READ_BATCH or batch[-1].pending == 0:
                return

    def _keep(self, state: TreeState, grown: int) -> None:
        tree_id = state.tree_id
        if tree_id in self._cache:
            self._cache.move_to_end(tree_id)
            self._cached_nodes += grown
        else:
            self._cache[tree_id] = state
            self._cached_nodes += state.size
        while self._cached_nodes > self._cache_limit and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_nodes -= dropped.size
            self._locks.pop(dropped.tree_id, None)

    # -- writes -------------------------------------------------------------------------------
    async def publish(self, node: ContextNode) -> int:
        """Store a node as is (no checks): for writers that derive their nodes from a fact
        already on record (the work lifecycle). Returns its stream sequence."""
        ack = await self._js.publish(
            self.names.context_subject(node.tree_id),
            node.to_json_bytes(),
            stream=self.names.context_stream,
            headers={"Nats-Msg-Id": node.id},
        )
        return int(ack.seq)

    async def _store(self, state: TreeState, node: ContextNode) -> ContextNode:
        check_append(state, node)
        seq = await self.publish(node)
        last = state.last_seq
        state.add(node, seq)
        state.last_seq = last  # own writes do not move the read horizon (see the module doc)
        return node

    async def create_tree(
        self,
        meta: TreeMeta,
        *,
        author: str,
        author_user: str | None = None,
        tree_id: str | None = None,
        root_id: str | None = None,
        handle: ContextHandle | None = None,
        text: str | None = None,
        kind: str = "root",
        scope: Scope = Scope.TEAM,
        listed: bool = True,
        root_meta: Mapping[str, str] | None = None,
    ) -> tuple[TreeState, ContextNode, bool]:
        """Start a tree (or find it, for a derived id that exists already): its state, its
        root (with ``root_meta``, the metadata its creator gave), and whether this call
        created it."""
        fields: dict[str, Any] = {}
        if tree_id is not None:
            fields["tree_id"] = tree_id
        root = ContextNode(
            **({"id": root_id} if root_id else {}),
            tree_id=tree_id or "0" * 32,
            kind=kind,
            handle=handle or ContextHandle(),
            author=author,
            author_user=author_user,
            scope=scope,
            text=text,
            meta=dict(root_meta or {}),
            tree=meta,
        )
        if tree_id is None:
            root = root.model_copy(update={"tree_id": root.id})
        state = await self.tree(root.tree_id)
        if state.exists:
            return state, state.nodes[state.root or ""], False
        if listed:
            entry = TreeEntry.of(meta, root.tree_id, created_by=author, created_at=root.at)
            await create_if_absent(await self.index(), index_key(meta, root.tree_id), entry.to_json_bytes())
        await self._store(state, root)
        return state, root, True

    async def append(
        self,
        tree_id: str,
        given: NodeInput,
        *,
        author: str,
        author_user: str | None = None,
        node_id: str | None = None,
    ) -> ContextNode:
        state = await self.existing(tree_id)
        node = ContextNode(
            **({"id": node_id} if node_id else {}),
            tree_id=tree_id,
            author=author,
            author_user=author_user,
            **given.model_dump(),
        )
        if node_id is not None and node_id in state.nodes:
            return state.nodes[node_id]
        return await self._store(state, node)

    async def update(
        self,
        tree_id: str,
        node_id: str,
        given: NodeInput | None,
        *,
        author: str,
        author_user: str | None = None,
    ) -> ContextNode:
        state = await self.existing(tree_id)
        node = update_of(state, node_id, given, author=author)
        node = node.model_copy(update={"author_user": author_user})
        return await self._store(state, node)

    async def tombstone(
        self, tree_id: str, node_id: str, *, author: str, author_user: str | None = None, reason: str = ""
    ) -> ContextNode:
        state = await self.existing(tree_id)
        first = state.find(node_id)
        node = ContextNode(
            tree_id=tree_id,
            parent_id=first,
            target=first,
            kind=TOMBSTONE,
            author=author,
            author_user=author_user,
            text=reason or None,
            handle=ContextHandle(),
        )
        return await self._store(state, node)

    # -- tree-level changes: compare-and-set on the tree's subject ------------------------------
    async def _store_unchanged(
        self, tree_id: str, make: Callable[[TreeState], ContextNode]
    ) -> tuple[TreeState, ContextNode]:
        """Store the node ``make`` builds from the tree as it stands, only if nothing was
        appended to the tree meanwhile (else read it again, check again, retry)."""
        for _ in range(CAS_TRIES):
            state = await self.existing(tree_id)
            node = make(state)
            check_append(state, node)
            seq = await publish_unchanged(
                self._js,
                self.names.context_subject(tree_id),
                node.to_json_bytes(),
                max(state.last_seq, state.max_seq),
                per_subject=True,
                headers={"Nats-Msg-Id": node.id},
            )
            if seq is not None:
                last = state.last_seq
                state.add(node, seq)
                state.last_seq = last
                return state, node
        raise ContextConflict("the tree kept changing while this was written; try again", field="tree_id")

    async def update_tree(
        self, tree_id: str, change: TreeChange, *, author: str, author_user: str | None = None
    ) -> TreeState:
        """New metadata (title, description, ref) as a new version of the root."""

        def make(state: TreeState) -> ContextNode:
            meta = changed_meta(state.meta, change)
            assert state.root is not None
            root = update_of(state, state.root, None, author=author, tree=meta)
            return root.model_copy(update={"author_user": author_user})

        state, _ = await self._store_unchanged(tree_id, make)
        meta = state.meta
        await self._change_entry(
            state,
            lambda e: e.model_copy(
                update={"title": meta.title, "description": meta.description, "ref": meta.ref}
            ),
        )
        return state

    async def schedule_deletion(
        self, tree_id: str, *, window_s: float, author: str, author_user: str | None = None, now: datetime
    ) -> tuple[TreeState, ContextNode]:
        """Mark the tree for deletion: purged after ``window_s`` unless restored before.
        Work trees go with their work record and cannot be deleted by hand."""
        state = await self.existing(tree_id)
        if state.meta.kind == "work":
            raise ContextConflict(
                "a work item's tree is removed with its record (WEFT_WORK_RETENTION_S)", field="tree_id"
            )
        scheduled = deletion(state)
        if scheduled is not None:
            await self._mark_entry(state, scheduled)  # finish a schedule cut short before its listing
            raise ContextConflict("is scheduled for deletion already", field="tree_id")

        def make(state: TreeState) -> ContextNode:
            assert state.root is not None
            due = now + timedelta(seconds=window_s)
            return ContextNode(
                tree_id=tree_id,
                parent_id=state.root,
                kind=DELETION,
                author=author,
                author_user=author_user,
                meta={"purge_after": due.isoformat()},
            )

        state, mark = await self._store_unchanged(tree_id, make)
        await self._mark_entry(state, mark)
        return state, mark

    async def restore(self, tree_id: str, *, author: str, author_user: str | None = None) -> TreeState:
        """Undo a scheduled deletion (before it is purged)."""

        def make(state: TreeState) -> ContextNode:
            assert state.root is not None
            return ContextNode(
                tree_id=tree_id, parent_id=state.root, kind=RESTORE, author=author, author_user=author_user
            )

        state, _ = await self._store_unchanged(tree_id, make)
        await self._change_entry(state, lambda e: e.model_copy(update={"deleting": None}))
        return state

    async def purge_if_due(self, tree_id: str, now: datetime) -> bool:
        """Purge a tree whose scheduled deletion is due (its own mark decides, not the
        listing); a listing that still says scheduled after a restore is corrected."""
        state = await self.tree(tree_id)
        mark = deletion(state) if state.exists else None
        if mark is None:
            await self._change_entry(state, lambda e: e.model_copy(update={"deleting": None}))
            return False
        if purge_after(mark) > now:
            return False
        await self.purge(tree_id)
        kv = await self.index()
        key = index_key(state.meta, tree_id)
        found = await get_or_none(kv, key)
        if found is not None:
            await delete_unchanged(kv, key, found.revision or 0)
        return True

    async def _mark_entry(self, state: TreeState, mark: ContextNode) -> None:
        deleting = Deleting.of(mark)
        await self._change_entry(state, lambda e: e.model_copy(update={"deleting": deleting}))

    async def _change_entry(self, state: TreeState, change: Callable[[TreeEntry], TreeEntry]) -> None:
        """Apply ``change`` to the tree's listing (compare-and-set; no listing: nothing to do)."""
        if not state.exists:
            return
        kv = await self.index()
        key = index_key(state.meta, state.tree_id)
        for _ in range(CAS_TRIES):
            found = await get_or_none(kv, key)
            if found is None or found.value is None:
                return
            entry = TreeEntry.model_validate_json(found.value)
            changed = change(entry)
            if changed == entry or await update_unchanged(
                kv, key, changed.to_json_bytes(), found.revision or 0
            ):
                return
        raise ContextConflict(
            "the tree's listing kept changing while this was written; try again", field="tree_id"
        )

    async def import_tree(self, document: TreeExport, *, author: str) -> tuple[TreeState, int]:
        """Store an exported tree under derived ids (shared/context/transfer.py): the tree
        and how many of its nodes this call stored (0: imported before; an import cut short
        is finished by the next one)."""
        wanted, nodes = rehome(document)
        meta = wanted.meta
        entry = TreeEntry.of(meta, wanted.tree_id, created_by=author, created_at=utcnow())
        await create_if_absent(await self.index(), index_key(meta, wanted.tree_id), entry.to_json_bytes())
        state = await self.tree(wanted.tree_id)
        stored = 0
        for node in nodes:
            if node.id not in state.nodes:
                await self.publish(node)
                stored += 1
        return await self.existing(wanted.tree_id), stored

    async def purge(self, tree_id: str) -> None:
        """Remove a tree for good (its work record is gone; docs/context.md, Retention)."""
        await self.ensure()
        await self._js.purge_stream(self.names.context_stream, subject=self.names.context_subject(tree_id))
        state = self._cache.pop(tree_id, None)
        if state is not None:
            self._cached_nodes -= state.size

    # -- listing ----------------------------------------------------------------------------------
    async def entries(self, prefix: str = ">") -> list[TreeEntry]:
        """Index entries under a key pattern (``thread.<channel>.*``, ``tree.*``, ``>``)."""
        kv = await self.index()
        values = await snapshot_keys(self._js, kv, self.names.contexts_bucket, prefix)
        out: list[TreeEntry] = []
        for raw in values.values():
            try:
                out.append(TreeEntry.model_validate_json(raw))
            except ValidationError:
                continue
        out.sort(key=lambda e: (e.created_at, e.tree_id))
        return out

    async def entry(self, meta: TreeMeta, tree_id: str) -> TreeEntry | None:
        found = await get_or_none(await self.index(), index_key(meta, tree_id))
        return None if found is None or found.value is None else TreeEntry.model_validate_json(found.value)

    # -- changes ----------------------------------------------------------------------------------
    async def changes(
        self, tree_id: str | None = None, *, cursor: str | None = None, limit: int = 100
    ) -> tuple[list[Change], str]:
        """Nodes stored after ``cursor`` (one tree, or every tree of the project), oldest
        first, and the cursor to pass next time (always given)."""
        if not 1 <= limit <= MAX_PAGE:
            raise ContextError(f"must be between 1 and {MAX_PAGE}", field="limit")
        await self.ensure()
        subject = self.names.context_subjects if tree_id is None else self.names.context_subject(tree_id)
        after = check_change_cursor(cursor, tree_id)
        try:
            batch = await direct_get_batch(
                self._nc,
                self.names.context_stream,
                start_seq=after + 1,
                batch=limit,
                subject=subject,
                timeout=self._timeout,
            )
        except JetStreamReplyError as exc:
            if exc.status != "408":
                raise
            batch = []
        out: list[Change] = []
        for stored in batch:
            after = stored.seq
            try:
                out.append(Change(seq=stored.seq, node=ContextNode.model_validate_json(stored.data)))
            except ValidationError:
                continue
        return out, encode_cursor({"t": tree_id, "s": after})

    # -- resolving handles ------------------------------------------------------------------------
    async def resolve(
        self, state: TreeState, node_ids: Iterable[str], viewer: Viewer | None = None
    ) -> list[Resolved]:
        """The content behind each node's handle, for handles whose source is Loom itself."""
        out: list[Resolved] = []
        for node_id in node_ids:
            node = state.latest(state.find(node_id, "node_ids"))
            out.append(await self._resolve(node, viewer))
        return out

    async def _resolve(self, node: ContextNode, viewer: Viewer | None) -> Resolved:
        handle = node.handle
        done = Resolved(node.id, handle.source, handle.id, handle.version, resolved=False)
        if viewer is not None and not readable(node, agent_id=viewer.agent_id, user_id=viewer.user_id):
            done.reason = "not visible to you (its scope)"
            return done
        if handle.source not in LOOM_SOURCES:
            done.reason = f"{handle.source} is not a Loom source: fetch it yourself"
            return done
        if handle.source in (HandleSource.INLINE, HandleSource.DIRECT):
            if node.text is None:
                done.reason = "the message is no longer stored and the node kept no copy"
                return done
            done.resolved, done.content = True, node.text
            return done
        if handle.source == HandleSource.WORK:
            kv = await ensure_kv(self._js, self.names.work_records_bucket, description="Loom work")
            entry = await get_or_none(kv, handle.id)
            if entry is None or entry.value is None:
                done.reason = "the work item is no longer stored"
                return done
            done.resolved, done.content = True, json.loads(entry.value).get("item")
            return done
        if handle.source == HandleSource.CHANNEL:
            return await self._resolve_channel(done, handle, viewer)
        tree_id, _, other = handle.id.partition("/")
        target = await self.tree(tree_id)
        if other not in target.origin:
            done.reason = "no such node (any more)"
            return done
        found = target.latest(target.origin[other])
        if viewer is not None and not readable(found, agent_id=viewer.agent_id, user_id=viewer.user_id):
            done.reason = "not visible to you (its scope)"
            return done
        done.resolved, done.content = True, found.model_dump(mode="json")
        return done

    async def _resolve_channel(
        self, done: Resolved, handle: ContextHandle, viewer: Viewer | None
    ) -> Resolved:
        channel, _, seq_text = handle.id.partition("/")
        seq = int(seq_text)
        try:
            stored = await direct_get_batch(
                self._nc, self.names.channel_stream(channel), start_seq=seq, batch=1, timeout=self._timeout
            )
        except (JetStreamReplyError, TimeoutError):
            stored = []
        except Exception as exc:  # no such stream: nobody answers the request
            log.debug("channel %s not readable: %s", channel, exc)
            stored = []
        if not stored or stored[0].seq != seq:
            done.reason = "the message is no longer stored (expired or never sent)"
            return done
        if viewer is not None and not visible(stored[0].headers, viewer):
            done.reason = "not visible to you (its scope)"
            return done
        done.resolved, done.content = True, json.loads(stored[0].data)
        return done


def page_entries(entries: list[TreeEntry], *, limit: int, cursor: str | None) -> Page[TreeEntry]:
    """Listed trees, newest first, paged by (created, id): what Weft's listing and Warp's
    ``warp_context_list`` return."""
    ordered = sorted(entries, key=lambda e: (e.created_at, e.tree_id), reverse=True)
    total = len(ordered)
    after = decode_cursor(cursor)
    if after is not None:
        at, tree = after.get("at"), after.get("id")
        if not isinstance(at, str) or not isinstance(tree, str):
            raise CursorError()
        ordered = [e for e in ordered if (e.created_at.isoformat(), e.tree_id) < (at, tree)]
    page = ordered[:limit]
    more = len(ordered) > limit
    following = (
        encode_cursor({"at": page[-1].created_at.isoformat(), "id": page[-1].tree_id}) if more else None
    )
    return Page(items=page, next_cursor=following, total=total)


def check_change_cursor(cursor: str | None, tree_id: str | None) -> int:
    """The sequence a changes cursor stands for (0 without one); refuses a cursor that
    reads of changes (of this tree, or of every tree) did not issue."""
    state = decode_cursor(cursor)
    if state is None:
        return 0
    given = state.get("s")
    if not isinstance(given, int) or given < 0 or state.get("t") != tree_id:
        raise CursorError()
    return given
