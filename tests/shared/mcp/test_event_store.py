"""The event store behind Streamable HTTP resumability (shared/mcp/http.py): replay after an
id, per stream, bounded."""

from __future__ import annotations

from mcp.server.streamable_http import EventMessage
from mcp.types import JSONRPCMessage, JSONRPCNotification

from shared.mcp.http import MemoryEventStore


def note(n: int) -> JSONRPCMessage:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n})


async def replayed(store: MemoryEventStore, after: str) -> tuple[str | None, list[tuple[str | None, int]]]:
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    stream = await store.replay_events_after(after, send)
    return stream, [(e.event_id, e.message.params["n"]) for e in got]  # type: ignore[union-attr,index]


async def test_events_after_an_id_of_the_same_stream_are_replayed_in_order() -> None:
    store = MemoryEventStore()
    priming = await store.store_event("req:7", None)
    first = await store.store_event("req:7", note(1))
    await store.store_event("other", note(99))
    second = await store.store_event("req:7", note(2))
    assert await replayed(store, priming) == ("req:7", [(first, 1), (second, 2)])  # a ':' in the id is fine
    assert await replayed(store, first) == ("req:7", [(second, 2)])
    assert await replayed(store, second) == ("req:7", [])


async def test_the_store_is_bounded_and_forgets_the_oldest() -> None:
    store = MemoryEventStore(max_events=2, max_streams=2)
    ids = [await store.store_event("a", note(n)) for n in range(4)]
    assert await replayed(store, ids[0]) == ("a", [(ids[2], 2), (ids[3], 3)])  # 0 and 1 are gone
    await store.store_event("b", note(10))
    await store.store_event("c", note(20))  # a third stream: the oldest (a) is dropped
    assert await replayed(store, ids[3]) == (None, [])
    assert await replayed(store, "not-an-id") == (None, [])
