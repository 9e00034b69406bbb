"""A build layer's memories in tier order, without scoring every memory (docs/pattern.md,
Importance and tiers).

Scoring all 10,000 memories of a store for every build would cost more than the build
itself. Most memories were never read: their score is recency since they were written
plus their category's weight, so whether one is hot, warm or cold is a comparison of its
write time with two cut-off times per category. The index keeps each category newest
first, so the unread hot memories of a rank are a prefix of it, and a pass stops at the
first memory older than every cut-off of the rank. Memories that were read (a few, kept
in a set by the index and the access log) are scored one by one.

A layer then offers its memories hot first (read ones first, then the rest in recall
order), then warm, then cold, lazily: the build stops pulling once its budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from pattern.importance import HOUR_S, ImportancePolicy, Tier
from pattern.index import Entry, MemoryIndex
from pattern.models import CATEGORY_RANK, Category, Scope
from pattern.sweep import AccessLog

TIERS = (Tier.HOT, Tier.WARM, Tier.COLD)
Cutoffs = dict[Category, tuple[float, float]]
"""Per category: written at or after the first time (a timestamp): hot; the second: warm."""


def cutoffs(policy: ImportancePolicy, now: datetime) -> Cutoffs:
    """When an unread memory of each category stops being hot, and warm."""
    now_ts = now.timestamp()

    def after(cut: float, weight: float) -> float:
        if weight >= cut:
            return -math.inf  # its weight alone reaches the cut: always
        if weight + policy.recency < cut:
            return math.inf  # even brand new it falls short: never
        age_h = policy.half_life_h * math.log2(policy.recency / (cut - weight))
        return now_ts - age_h * HOUR_S

    return {
        c: (after(policy.hot, policy.weights.get(c, 0.1)), after(policy.warm, policy.weights.get(c, 0.1)))
        for c in Category
    }


class TierWalk:
    """Tier-ordered walks over one index (one per memory service)."""

    def __init__(self, index: MemoryIndex, accesses: AccessLog, policy: ImportancePolicy) -> None:
        self.index = index
        self.accesses = accesses
        self.policy = policy

    def tier(self, entry: Entry, now: datetime, cuts: Cutoffs | None = None) -> Tier:
        count, last = self.accesses.pending(entry.uid)
        if not count and not entry.record.access_count:
            hot, warm = (cuts or cutoffs(self.policy, now))[entry.parts.category]
            written = -entry.sort_key[0]
            return Tier.HOT if written >= hot else Tier.WARM if written >= warm else Tier.COLD
        return self.policy.tier(self.policy.score(entry.record, now, extra_accesses=count, last=last))

    def walk(
        self,
        scopes: Iterable[Scope],
        categories: Iterable[Category],
        accept: Callable[[Entry], bool],
        now: datetime,
        tiers: set[str] | None = None,
    ) -> Iterator[tuple[Entry, Tier]]:
        """The layer's memories that ``accept`` takes: hot, then warm, then cold."""
        scope_set, cats = set(scopes), set(categories)
        cuts = cutoffs(self.policy, now)
        read_uids = self.index.accessed() | self.accesses.uids()
        read: dict[Tier, list[Entry]] = {t: [] for t in TIERS}
        for uid in read_uids:
            entry = self.index.entry(uid)
            if (
                entry is not None
                and entry.parts.scope in scope_set
                and entry.parts.category in cats
                and accept(entry)
            ):
                read[self.tier(entry, now, cuts)].append(entry)
        for tier in TIERS:
            if tiers is not None and tier.value not in tiers:
                continue
            for entry in sorted(read[tier], key=lambda e: (CATEGORY_RANK[e.parts.category], e.sort_key)):
                yield entry, tier
            for of_rank, entries in self.index.walk_ranks(scope_set, cats):
                # the oldest write time that is still in this tier, for any category of the rank
                floor = -math.inf if tier is Tier.COLD else min(cuts[c][TIERS.index(tier)] for c in of_rank)
                for entry in entries:
                    written = -entry.sort_key[0]
                    if written < floor:
                        break  # older ones of this rank are all in a lower tier
                    if entry.uid in read_uids or not accept(entry):
                        continue
                    hot, warm = cuts[entry.parts.category]
                    found = Tier.HOT if written >= hot else Tier.WARM if written >= warm else Tier.COLD
                    if found is tier:
                        yield entry, tier
