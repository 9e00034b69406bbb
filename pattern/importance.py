"""How important a memory is now, and so its tier (docs/pattern.md, Importance and tiers).

The score follows the context loop of the supervision design: recency (decaying with
a half-life since the memory was last read or written), access frequency (logarithmic in
how often it was read) and a weight per category, summed and capped at 1.0. Tiers cut the
score: **hot** (at least ``hot``), **warm** (at least ``warm``), **cold** (the rest).

Nothing stores a tier: it is the score at the moment of reading, so a memory read often
rises and one left alone decays on its own, without any call. What is stored is what the
score needs: each memory's access count and last access, which every Pattern process
counts as it serves reads and writes back in a periodic sweep (``MemoryService.sweep``).

Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final

from pattern.models import Category, MemoryRecord

HOUR_S: Final = 3600.0


class Tier(StrEnum):
    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


TIER_ORDER: Final = {Tier.HOT: 0, Tier.WARM: 1, Tier.COLD: 2}

DEFAULT_WEIGHTS: Final[dict[Category, float]] = {
    Category.CORE: 0.30,
    Category.DECISIONS: 0.25,
    Category.ARCHITECTURE: 0.25,
    Category.LEARNINGS: 0.20,
    Category.LONGTERM: 0.20,
    Category.TASKS: 0.15,
    Category.RECENT: 0.10,
}


@dataclass(frozen=True)
class ImportancePolicy:
    """The weights and cuts (``PATTERN_*`` variables set them; docs/pattern.md)."""

    half_life_h: float = 24.0
    """Hours for the recency part to halve."""
    recency: float = 0.4
    frequency: float = 0.3
    saturation: int = 147
    """Accesses at which the frequency part is full (ln(n + 1) / ln(saturation + 1))."""
    weights: dict[Category, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    hot: float = 0.8
    warm: float = 0.4

    def score(
        self, record: MemoryRecord, now: datetime, *, extra_accesses: int = 0, last: datetime | None = None
    ) -> float:
        """0.0-1.0: recency since its last access (or write) + frequency + its category's weight."""
        seen = max(t for t in (record.updated_at, record.accessed_at, last) if t is not None)
        age_h = max(0.0, (now - seen).total_seconds() / HOUR_S)
        recency: float = self.recency * math.pow(0.5, age_h / self.half_life_h)
        count = record.access_count + extra_accesses
        frequency = self.frequency * min(1.0, math.log1p(count) / math.log1p(self.saturation))
        return min(1.0, recency + frequency + self.weights.get(record.category, 0.1))

    def tier(self, score: float) -> Tier:
        if score >= self.hot:
            return Tier.HOT
        if score >= self.warm:
            return Tier.WARM
        return Tier.COLD


def parse_weights(text: str) -> dict[Category, float]:
    """``core=0.3,decisions=0.25`` (categories not named keep their default weight)."""
    weights = dict(DEFAULT_WEIGHTS)
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.partition("=")
        try:
            category = Category(name.strip())
            weight = float(value)
        except ValueError:
            raise ValueError("each entry must be <category>=<weight between 0 and 1>") from None
        if not 0.0 <= weight <= 1.0:
            raise ValueError("each entry must be <category>=<weight between 0 and 1>")
        weights[category] = weight
    return weights
