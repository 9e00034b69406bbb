"""Compare-and-set on one KV key: the one loop every revision-checked change runs.

Every state change in Loom is read, decide, write on the revision read; a writer
that lost the race (another replica or agent wrote meanwhile) backs off and decides
again from a fresh read, and after :data:`CAS_RETRIES` lost races the caller's own
conflict error says "try again". :func:`cas_update` changes a key that must exist;
:func:`cas_upsert` also creates it when it has no value. The caller's ``decide``
holds the rule: it returns the new value, None to leave the stored one as it is,
:data:`DELETE` (:func:`cas_update` only) to delete it, or raises to refuse.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Generic, TypeAlias, TypeVar, cast

from nats.js.kv import KeyValue

from shared.nats.jetstream import create_new, delete_unchanged, get_or_none, update_unchanged

T = TypeVar("T")

CAS_RETRIES = 60
"""Lost races before a change gives up with the caller's conflict error."""


async def cas_backoff(attempt: int) -> None:
    """Sleep before retrying a lost compare-and-set: jittered and growing, so
    many writers racing on one key spread out instead of colliding forever."""
    await asyncio.sleep(random.uniform(0, 0.001 * (2 ** min(attempt, 7))))


class Delete(Enum):
    """The type of :data:`DELETE`."""

    DELETE = "delete"


DELETE: Final = Delete.DELETE
"""What ``decide`` returns to delete the key (only if it is still at the revision read)."""


@dataclass(frozen=True, slots=True)
class Swap(Generic[T]):
    """What one compare-and-set did."""

    before: T
    """The value ``decide`` saw (with :func:`cas_upsert`, None when the key had none)."""
    after: T | None
    """The value stored now: the one written, ``before`` when unchanged, None when deleted."""
    revision: int
    """The write's revision; the one read when nothing was written or the key was deleted
    (0: it had no value)."""
    changed: bool
    """Whether this call wrote (or deleted)."""


Read = Callable[[], Awaitable[tuple[T, int] | None]]
"""The current value and its revision, or None when the key has none."""
OnLost = Callable[[], Awaitable[object]]
Decision: TypeAlias = "T | Delete | None"
"""The new value, :data:`DELETE`, or None: leave the stored value as it is."""


async def cas_update(
    kv: KeyValue,
    key: str,
    decide: Callable[[T], Decision[T] | Awaitable[Decision[T]]],
    *,
    parse: Callable[[bytes], T],
    dump: Callable[[T], bytes],
    absent: Callable[[], Exception],
    conflict: Callable[[], Exception],
    read: Read[T] | None = None,
    on_lost: OnLost | None = None,
    known: tuple[T, int] | None = None,
) -> Swap[T]:
    """Change ``key``, which must hold a value (else ``absent()`` is raised), compare-and-set.

    ``read`` replaces the read from ``kv`` (for a caller that keeps a caught-up copy of
    the bucket, or reads through a method of its own); ``on_lost`` runs after each lost
    race, before the back-off (to catch such a copy up, or to undo what ``decide`` did
    outside the key). ``known``: the value and revision the caller wrote last (the key's
    only writer, most of the time), decided on without a read; if the key moved since,
    that first write loses and the loop reads as usual, at once.
    """
    swap = await _swap(kv, key, decide, parse, dump, absent, conflict, read, on_lost, known)
    return cast(Swap[T], swap)


async def cas_upsert(
    kv: KeyValue,
    key: str,
    decide: Callable[[T | None], T | Awaitable[T | None] | None],
    *,
    parse: Callable[[bytes], T],
    dump: Callable[[T], bytes],
    conflict: Callable[[], Exception],
    read: Read[T] | None = None,
    on_lost: OnLost | None = None,
) -> Swap[T | None]:
    """Change ``key`` compare-and-set, creating it when it has no value (``decide`` then
    sees None); a create that another writer beat is a lost race like any other.
    ``read`` and ``on_lost`` as in :func:`cas_update`."""
    swap = await _swap(kv, key, decide, parse, dump, None, conflict, read, on_lost, None)
    return cast(Swap[T | None], swap)


async def _swap(
    kv: KeyValue,
    key: str,
    decide: Callable[[Any], Any],
    parse: Callable[[bytes], Any],
    dump: Callable[[Any], bytes],
    absent: Callable[[], Exception] | None,
    conflict: Callable[[], Exception],
    read: Read[Any] | None,
    on_lost: OnLost | None,
    known: tuple[Any, int] | None,
) -> Swap[Any]:
    for attempt in range(CAS_RETRIES):
        guessed = attempt == 0 and known is not None
        found = known if guessed else await (read() if read is not None else _read(kv, key, parse))
        if found is None and absent is not None:
            raise absent()
        current, revision = found if found is not None else (None, 0)
        verdict = decide(current)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is None or (verdict is DELETE and found is None):
            return Swap(current, current, revision, changed=False)
        if verdict is DELETE:
            if await delete_unchanged(kv, key, revision):
                return Swap(current, None, revision, changed=True)
        else:
            raw = dump(verdict)
            written = await (
                create_new(kv, key, raw) if found is None else update_unchanged(kv, key, raw, revision)
            )
            if written is not None:
                return Swap(current, verdict, written, changed=True)
        if on_lost is not None:
            await on_lost()
        if not guessed:  # a stale guess lost to no one racing now: read again at once
            await cas_backoff(attempt)
    raise conflict()


async def _read(kv: KeyValue, key: str, parse: Callable[[bytes], Any]) -> tuple[Any, int] | None:
    entry = await get_or_none(kv, key)
    if entry is None or entry.value is None:
        return None
    return parse(entry.value), int(entry.revision or 0)
