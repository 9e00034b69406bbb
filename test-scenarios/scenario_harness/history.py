"""A drill's history of every operation, and the invariants checked on it (scenario 31).

Each operation is kept with the moment it was asked and the moment its answer came back
(one monotonic clock: every process of a drill runs on this machine), so a check can tell
"B happened after A" (B asked after A answered) from "A and B overlapped" (anything may
have happened in either order). Every check is conservative in the same way: it reports
a violation only where the order of the answers proves one.

* **lost**: an item whose submission Weft acknowledged (201) and that never completed.
* **doubled**: an item two completions were accepted for (by any agents).
* **double grants**: a lease B granted while an overlapping lease A still stood: A's holder
  released A itself, successfully, only after B's grant had been answered, and B was
  granted before A's expiry. (A lease Weft ended because its holder went offline cannot
  be released by its holder: the release is refused, so that case is never counted.)
* **token order**: fencing tokens are unique, and a grant asked after another was
  answered carries a larger token, across partitions and node crashes alike.

The rules are pure, so ``test_s31_history.py`` checks each on a history made by hand.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def clock() -> float:
    return time.monotonic()


@dataclass(frozen=True)
class Submission:
    asked: float
    answered: float
    item_id: str | None
    """None: not acknowledged (an error or no answer); such an item may or may not exist."""
    via: str


@dataclass(frozen=True)
class Completion:
    item_id: str
    agent: str
    asked: float
    answered: float


@dataclass(frozen=True)
class Grant:
    lease_id: str
    holder: str
    token: int
    asked: float
    answered: float
    acquired_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class Release:
    lease_id: str
    asked: float
    answered: float
    ok: bool


@dataclass(frozen=True)
class Fault:
    name: str
    began: float
    ended: float


@dataclass
class History:
    submissions: list[Submission] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    refused_completions: list[Completion] = field(default_factory=list)
    grants: list[Grant] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)

    def acknowledged(self) -> set[str]:
        return {s.item_id for s in self.submissions if s.item_id is not None}

    def outstanding(self) -> int:
        """Acknowledged items not completed yet (negative: completions of items whose
        submission was not acknowledged, e.g. its answer timed out)."""
        return len(self.acknowledged()) - len({c.item_id for c in self.completions})

    def counts(self) -> dict[str, int]:
        return {
            "submitted": len(self.submissions),
            "acknowledged": len(self.acknowledged()),
            "completions": len(self.completions),
            "refused_completions": len(self.refused_completions),
            "grants": len(self.grants),
            "releases": sum(1 for r in self.releases if r.ok),
            "releases_refused": sum(1 for r in self.releases if not r.ok),
            "faults": len(self.faults),
        }


def lost(history: History, records: dict[str, dict[str, Any]]) -> list[str]:
    """Acknowledged items that are not completed in ``records`` (work records by id)."""
    return sorted(i for i in history.acknowledged() if (records.get(i) or {}).get("status") != "completed")


def doubled(history: History) -> dict[str, int]:
    """Items with more than one accepted completion, and how many."""
    counts = Counter(c.item_id for c in history.completions)
    return {item: n for item, n in sorted(counts.items()) if n > 1}


def double_grants(history: History) -> list[str]:
    """Each pair of leases proven to have been granted to two holders at once."""
    released = {r.lease_id: r for r in history.releases if r.ok}
    found: list[str] = []
    for a in history.grants:
        release = released.get(a.lease_id)
        if release is None:
            continue
        for b in history.grants:
            if b.token <= a.token or b.holder == a.holder:
                continue
            if b.answered < release.asked and b.acquired_at < a.expires_at:
                found.append(
                    f"token {b.token} ({b.holder}) granted while token {a.token} ({a.holder}) stood: "
                    f"its holder released it {release.asked - b.answered:.3f}s after"
                )
    return found


def token_disorder(history: History) -> list[str]:
    """Fencing tokens used twice, or smaller for a grant asked after another was answered."""
    found = [
        f"token {token} granted {n} times"
        for token, n in Counter(g.token for g in history.grants).items()
        if n > 1
    ]
    by_answer = sorted(history.grants, key=lambda g: g.answered)
    for b in history.grants:
        for a in by_answer:
            if a.answered >= b.asked:
                break
            if a.token >= b.token:
                found.append(f"token {b.token} asked after token {a.token} was granted")
    return found
