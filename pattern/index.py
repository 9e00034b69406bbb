"""In-process index of the memories one agent can see.

Recall has to answer in milliseconds with 10,000 memories in a bucket, and
NATS KV can only list keys by scanning the stream. So each Pattern process
follows the subjects it may read (its own private keys, its parent's if it is
a sub-agent, the team prefix, its user's bucket, the public bucket) with
ordered consumers, and keeps the latest value of every key here:

- one list per (scope, category), sorted newest first, so recall walks the
  categories in rank order and stops after ``limit`` matches;
- a tag -> memory map, so a tag filter starts from the smallest tag set;
- counters per (scope, creator, category), so limits and the counts in a
  recall never need a scan;
- a heap of expiry times, so expired memories leave at the moment they expire
  even before nats-server's expiry marker arrives;
- a window of recently expired keys (from local expiry and from the server's
  ``MaxAge`` markers), for the "recently expired" count.

Writes made by this process are applied at once (read-your-writes); the same
revision arriving later from the watcher is ignored, and an older revision
never overwrites a newer one.
"""

from __future__ import annotations

import bisect
import heapq
import logging
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from pattern.keys import KeyParts, parse_key
from pattern.models import CATEGORY_RANK, Category, MemoryRecord, Scope

log = logging.getLogger("loom.pattern.index")

SortKey = tuple[float, str]


@dataclass(slots=True)
class Entry:
    uid: str
    """``<bucket>/<key>``: unique across the buckets this index follows."""
    bucket: str
    key: str
    parts: KeyParts
    record: MemoryRecord
    revision: int
    sort_key: SortKey
    text: str
    """Lower-cased content and tags, for case-insensitive search."""
    tokens: int = -1
    """Tokens of the memory's line in a built context (counted once, when first needed)."""


def _sort_key(record: MemoryRecord, uid: str) -> SortKey:
    return (-record.updated_at.timestamp(), uid)


@dataclass
class _Partition:
    """Sort keys of one (scope, category), newest first."""

    keys: list[SortKey] = field(default_factory=list)
    dirty: bool = False

    def add(self, key: SortKey, bulk: bool) -> None:
        if bulk:
            self.keys.append(key)
            self.dirty = True
        else:
            bisect.insort(self.keys, key)

    def remove(self, key: SortKey) -> None:
        self.settle()
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            del self.keys[i]

    def settle(self) -> None:
        if self.dirty:
            self.keys.sort()
            self.dirty = False


class MemoryIndex:
    """Latest value of every followed key, with the structures recall needs."""

    def __init__(self, expired_window_s: float = 3600.0) -> None:
        self.expired_window_s = expired_window_s
        self._entries: dict[str, Entry] = {}
        self._by_id: dict[str, set[str]] = {}
        self._revs: dict[str, int] = {}
        self._partitions: dict[tuple[Scope, Category], _Partition] = {}
        self._tags: dict[str, set[str]] = {}
        self._counts: Counter[tuple[Scope, str, Category]] = Counter()
        self._expiry: list[tuple[float, str, int]] = []
        self._expired: deque[tuple[float, str, KeyParts]] = deque()
        self._expired_keys: set[str] = set()
        self._expired_counts: Counter[tuple[Scope, str, Category]] = Counter()
        self._bulk = False
        self._accessed: set[str] = set()
        """Uids of memories whose record counts reads (scored one by one; see pattern/tiers.py)."""
        self.version = 0
        """Moves on with every change (what a reader may cache its derived figures against)."""

    # -- loading ----------------------------------------------------------------
    def begin_bulk(self) -> None:
        """Initial load: append now, sort once in :meth:`end_bulk`."""
        self._bulk = True

    def end_bulk(self) -> None:
        self._bulk = False
        for part in self._partitions.values():
            part.settle()

    def __len__(self) -> int:
        return len(self._entries)

    # -- applying changes -----------------------------------------------------------
    def _fresh(self, uid: str, revision: int) -> bool:
        if revision <= self._revs.get(uid, 0):
            return False
        self._revs[uid] = revision
        return True

    def put(self, bucket: str, key: str, record: MemoryRecord, revision: int) -> bool:
        """Apply a value; False when it is stale or does not match its key."""
        parts = parse_key(key)
        uid = f"{bucket}/{key}"
        if parts is None or not _consistent(parts, record):
            log.warning("ignoring memory %s: key and value disagree", uid)
            return False
        if not self._fresh(uid, revision):
            return False
        self._drop(uid)
        entry = Entry(
            uid=uid,
            bucket=bucket,
            key=key,
            parts=parts,
            record=record,
            revision=revision,
            sort_key=_sort_key(record, uid),
            text=(record.content + "\n" + " ".join(record.tags)).lower(),
        )
        self._entries[uid] = entry
        self._by_id.setdefault(record.id, set()).add(uid)
        self._partitions.setdefault((parts.scope, parts.category), _Partition()).add(
            entry.sort_key, self._bulk
        )
        for tag in record.tags:
            self._tags.setdefault(tag, set()).add(uid)
        self._counts[(parts.scope, parts.owner, parts.category)] += 1
        if record.access_count:
            self._accessed.add(uid)
        self.version += 1
        if record.expires_at is not None:
            heapq.heappush(self._expiry, (record.expires_at.timestamp(), uid, revision))
        return True

    def remove(self, bucket: str, key: str, revision: int, *, expired_at: float | None = None) -> bool:
        """Apply a delete/purge (or, with ``expired_at``, a server expiry marker)."""
        uid = f"{bucket}/{key}"
        if not self._fresh(uid, revision):
            return False
        self._drop(uid)
        if expired_at is not None:
            parts = parse_key(key)
            if parts is not None:
                self._note_expired(uid, parts, expired_at)
        return True

    def _drop(self, uid: str) -> Entry | None:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return None
        self._accessed.discard(uid)
        self.version += 1
        ids = self._by_id.get(entry.record.id)
        if ids is not None:
            ids.discard(uid)
            if not ids:
                del self._by_id[entry.record.id]
        part = self._partitions.get((entry.parts.scope, entry.parts.category))
        if part is not None:
            part.remove(entry.sort_key)
        for tag in entry.record.tags:
            tagged = self._tags.get(tag)
            if tagged is not None:
                tagged.discard(uid)
                if not tagged:
                    del self._tags[tag]
        counter = (entry.parts.scope, entry.parts.owner, entry.parts.category)
        self._counts[counter] -= 1
        if self._counts[counter] <= 0:
            del self._counts[counter]
        return entry

    # -- expiry -------------------------------------------------------------------------
    def _note_expired(self, uid: str, parts: KeyParts, at: float) -> None:
        if uid in self._expired_keys:
            return
        self._expired_keys.add(uid)
        self._expired.append((at, uid, parts))
        self._expired_counts[(parts.scope, parts.owner, parts.category)] += 1

    def expire(self, now: datetime) -> int:
        """Drop what expired by ``now``; returns how many left the index."""
        ts = now.timestamp()
        dropped = 0
        while self._expiry and self._expiry[0][0] <= ts:
            at, uid, revision = heapq.heappop(self._expiry)
            entry = self._entries.get(uid)
            if entry is None or entry.revision != revision:
                continue
            self._drop(uid)
            self._note_expired(uid, entry.parts, at)
            dropped += 1
        horizon = ts - self.expired_window_s
        # Entries are appended in roughly time order; a marker older than the
        # window that arrived late is dropped when it reaches the front.
        while self._expired and self._expired[0][0] < horizon:
            _, uid, parts = self._expired.popleft()
            self._expired_keys.discard(uid)
            counter = (parts.scope, parts.owner, parts.category)
            self._expired_counts[counter] -= 1
            if self._expired_counts[counter] <= 0:
                del self._expired_counts[counter]
        return dropped

    # -- reading ------------------------------------------------------------------------
    def get(self, memory_id: str) -> list[Entry]:
        return [self._entries[uid] for uid in self._by_id.get(memory_id, ())]

    def entry(self, uid: str) -> Entry | None:
        return self._entries.get(uid)

    def walk(self, scopes: Iterable[Scope], categories: Iterable[Category]) -> Iterator[Entry]:
        """Entries of the given scopes and categories in recall order:
        category rank, then newest first."""
        cats = set(categories)
        scope_list = list(scopes)
        ranks = sorted({CATEGORY_RANK[c] for c in cats})
        for rank in ranks:
            lists: list[list[SortKey]] = []
            for cat in cats:
                if CATEGORY_RANK[cat] != rank:
                    continue
                for scope in scope_list:
                    part = self._partitions.get((scope, cat))
                    if part is not None and part.keys:
                        part.settle()
                        lists.append(part.keys)
            merged: Iterable[SortKey] = lists[0] if len(lists) == 1 else heapq.merge(*lists)
            for _, uid in merged:
                entry = self._entries.get(uid)
                if entry is not None:
                    yield entry

    def walk_ranks(
        self, scopes: Iterable[Scope], categories: Iterable[Category]
    ) -> Iterator[tuple[frozenset[Category], Iterator[Entry]]]:
        """:meth:`walk` one category rank at a time: (the rank's categories, its entries
        newest first), so a reader can leave a rank early."""
        cats = set(categories)
        scope_list = list(scopes)
        for rank in sorted({CATEGORY_RANK[c] for c in cats}):
            of_rank = frozenset(c for c in cats if CATEGORY_RANK[c] == rank)
            yield of_rank, self.walk(scope_list, of_rank)

    def accessed(self) -> set[str]:
        """Uids of memories whose record counts reads."""
        return self._accessed

    def tag_count(self, tag: str) -> int:
        return len(self._tags.get(tag, ()))

    def tagged(self, tags: list[str]) -> set[str] | None:
        """Uids carrying every tag (None when a tag is unknown: nothing matches)."""
        sets = []
        for tag in tags:
            found = self._tags.get(tag)
            if not found:
                return None
            sets.append(found)
        sets.sort(key=len)
        result = set(sets[0])
        for other in sets[1:]:
            result &= other
        return result

    def counts(self) -> Counter[tuple[Scope, str, Category]]:
        return self._counts

    def expired_counts(self) -> Counter[tuple[Scope, str, Category]]:
        return self._expired_counts

    def entries(self) -> Iterable[Entry]:
        return self._entries.values()


def _consistent(parts: KeyParts, record: MemoryRecord) -> bool:
    return (
        parts.id == record.id
        and parts.scope is record.scope
        and parts.category is record.category
        and parts.owner == record.agent_id
    )
