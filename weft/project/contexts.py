"""Weft's view of a project's context trees (docs/context.md): the trees themselves are
read through :class:`shared.context.store.ContextStore` (one caught-up copy per tree), and
the listing comes from one watched copy of the index bucket (``shared/nats/mirror.py``)."""

from __future__ import annotations

from datetime import datetime

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.context.store import INDEX_DM, INDEX_THREAD, INDEX_TREE, ContextStore, TreeEntry, page_entries
from shared.context.threads import Threads
from shared.context.trees import derive_id
from shared.events import publish_event
from shared.nats.mirror import BucketMirror, model_parser
from shared.paging import Page

KINDS = {"tree": INDEX_TREE, "thread": INDEX_THREAD, "dm-thread": INDEX_DM}


class ContextIndex:
    """The project's listed trees (threads, created trees), newest first."""

    def __init__(self, nc: NatsClient, js: JetStreamContext, store: ContextStore) -> None:
        self._nc = nc
        self._js = js
        self.store = store
        self.threads = Threads(nc, store.names, store)
        self._mirror: BucketMirror[TreeEntry] | None = None

    async def start(self) -> None:
        await self.store.index()
        self._mirror = BucketMirror(
            self._js, self.store.names.contexts_bucket, model_parser(TreeEntry), nc=self._nc
        )
        await self._mirror.start()

    async def stop(self) -> None:
        if self._mirror is not None:
            await self._mirror.stop()

    async def page(
        self,
        *,
        kind: str | None = None,
        channel: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[TreeEntry]:
        assert self._mirror is not None, "ContextIndex.start() was not awaited"
        await self._mirror.sync()
        prefix = ""
        if channel is not None:
            prefix = f"{INDEX_THREAD}.{channel}."
        elif kind is not None:
            prefix = f"{KINDS[kind]}."
        return page_entries(self._mirror.values(prefix), limit=limit, cursor=cursor)

    def scheduled(self) -> list[TreeEntry]:
        """Listed trees scheduled for deletion (as of the last sync)."""
        assert self._mirror is not None, "ContextIndex.start() was not awaited"
        return [e for e in self._mirror.values() if e.deleting is not None]

    async def purge_due(self, now: datetime) -> list[str]:
        """Purge the trees whose scheduled deletion is due (docs/context.md, Deleting a
        tree): their own deletion mark decides; any replica may do it, twice is harmless.
        It reads the watched copy as it stands (no sync: a sweep runs often, and a deletion
        that became due a moment ago is purged by the next one)."""
        assert self._mirror is not None, "ContextIndex.start() was not awaited"
        purged: list[str] = []
        for entry in self.scheduled():
            due = entry.deleting is not None and entry.deleting.purge_after <= now
            if due and await self.store.purge_if_due(entry.tree_id, now):
                purged.append(entry.tree_id)
                data = {"tree_id": entry.tree_id, "kind": entry.kind, "title": entry.title}
                msg_id = derive_id("tree-purged", entry.tree_id)
                await publish_event(
                    self._js, self.store.names, "context", "deleted", entry.tree_id, data, msg_id=msg_id
                )
        return purged
