"""Weft's view of a project's context trees (docs/context.md): the trees themselves are
read through :class:`shared.context.store.ContextStore` (one caught-up copy per tree), and
the listing comes from one watched copy of the index bucket (``shared/nats/mirror.py``)."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.context.store import INDEX_DM, INDEX_THREAD, INDEX_TREE, ContextStore, TreeEntry
from shared.context.threads import Threads
from shared.nats.mirror import BucketMirror, model_parser
from shared.paging import CursorError, Page, decode_cursor, encode_cursor

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
        entries = sorted(self._mirror.values(prefix), key=lambda e: (e.created_at, e.tree_id), reverse=True)
        total = len(entries)
        after = decode_cursor(cursor)
        if after is not None:
            last = _position(after)
            entries = [e for e in entries if (e.created_at.isoformat(), e.tree_id) < last]
        page = entries[:limit]
        more = len(entries) > limit
        following = (
            encode_cursor({"at": page[-1].created_at.isoformat(), "id": page[-1].tree_id}) if more else None
        )
        return Page(items=page, next_cursor=following, total=total)


def _position(state: dict[str, Any]) -> tuple[str, str]:
    at, tree = state.get("at"), state.get("id")
    if not isinstance(at, str) or not isinstance(tree, str):
        raise CursorError()
    return at, tree
