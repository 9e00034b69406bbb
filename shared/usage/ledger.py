"""Usage and budgets on JetStream: the day counters and the budgets document of a project.

The rules are in :mod:`shared.usage`; this module only stores and reads:

* the **usage bucket** (``ProjectNames.usage_bucket``) counts each UTC day's usage: key
  ``<day>`` for the whole project, ``<day>.t.<target id>`` for the agents a target started.
  Every report adds to them compare-and-set, so agents on many machines count into one
  total; the claim path reads them when a daily budget is set;
* the **budgets bucket** (``ProjectNames.budgets_bucket``) holds one document (key
  ``budgets``): the project's and the targets' daily limits, and the operator's pause. Weft changes it
  compare-and-set on its revision, so operators on several Weft replicas never overwrite
  each other's change; agents only read it (cached for a moment).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from datetime import datetime

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import Conflict
from shared.names import ProjectNames
from shared.nats.cas import cas_upsert
from shared.nats.jetstream import ensure_kv, get_or_none
from shared.usage.rules import (
    BudgetsDoc,
    Hold,
    Totals,
    Usage,
    day_of,
    pause_hold,
    project_hold,
    target_hold,
)

log = logging.getLogger("loom.usage")

BUDGETS_KEY = "budgets"
BUDGETS_CACHE_S = 2.0
"""How long a claim trusts the budgets it read (an operator's change reaches every agent
within this)."""
USAGE_TTL_S = 400 * 24 * 3600.0
"""Day counters are kept a little over a year."""
_KEY_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def target_key(day: str, target_id: str) -> str | None:
    """The counter key of a target's day, or None for an id that cannot be part of a key
    (such an agent's usage counts for the project only)."""
    return f"{day}.t.{target_id}" if _KEY_SAFE.fullmatch(target_id) else None


class UsageLedger:
    """One project's day counters and budgets."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self.names = names
        self._usage: KeyValue | None = None
        self._budgets: KeyValue | None = None
        self._lock = asyncio.Lock()
        self._doc: BudgetsDoc | None = None
        self._doc_read_at = 0.0

    async def _buckets(self) -> tuple[KeyValue, KeyValue]:
        if self._usage is None or self._budgets is None:
            async with self._lock:
                if self._usage is None or self._budgets is None:
                    self._budgets = await ensure_kv(
                        self._js, self.names.budgets_bucket, history=5, description="Loom budgets"
                    )
                    self._usage = await ensure_kv(
                        self._js, self.names.usage_bucket, ttl=USAGE_TTL_S, description="Loom usage per day"
                    )
        return self._usage, self._budgets

    # -- counters ------------------------------------------------------------------------
    async def add(self, usage: Usage, *, target_id: str | None, now: datetime) -> None:
        """Add one report to the day's project counter (and its target's)."""
        if usage.empty:
            return
        day = day_of(now)
        keys = [day]
        if target_id is not None and (key := target_key(day, target_id)) is not None:
            keys.append(key)
        kv, _ = await self._buckets()
        await asyncio.gather(*(self._add_to(kv, key, usage) for key in keys))

    async def _add_to(self, kv: KeyValue, key: str, usage: Usage) -> None:
        await cas_upsert(
            kv,
            key,
            lambda total: (Totals() if total is None else total).plus(usage),
            read=lambda: self._counter(kv, key),
            parse=Totals.model_validate_json,
            dump=Totals.to_json_bytes,
            conflict=lambda: Conflict(
                "usage: the day's counter is being changed concurrently; try again", field="usage"
            ),
        )

    async def _entry(self, kv: KeyValue, key: str) -> KeyValue.Entry | None:
        return await get_or_none(kv, key)

    async def _counter(self, kv: KeyValue, key: str) -> tuple[Totals, int] | None:
        entry = await self._entry(kv, key)
        if entry is None or entry.value is None:
            return None
        return Totals.model_validate_json(entry.value), int(entry.revision or 0)

    async def day_totals(self, day: str, target_id: str | None = None) -> Totals:
        """The counter of ``day`` for the project, or for ``target_id``'s agents."""
        kv, _ = await self._buckets()
        key = day if target_id is None else target_key(day, target_id)
        entry = await get_or_none(kv, key) if key is not None else None
        if entry is None or entry.value is None:
            return Totals()
        return Totals.model_validate_json(entry.value)

    # -- budgets ------------------------------------------------------------------------
    async def read_budgets(self) -> tuple[BudgetsDoc, int]:
        """The budgets document and its revision (0: none stored yet)."""
        _, kv = await self._buckets()
        entry = await get_or_none(kv, BUDGETS_KEY)
        if entry is None or entry.value is None:
            return BudgetsDoc(), 0
        return BudgetsDoc.model_validate_json(entry.value), int(entry.revision or 0)

    async def _stored_budgets(self) -> tuple[BudgetsDoc, int] | None:
        doc, revision = await self.read_budgets()
        return (doc, revision) if revision else None

    async def budgets(self) -> BudgetsDoc:
        """The budgets, cached for :data:`BUDGETS_CACHE_S` (the claim path reads them)."""
        now = time.monotonic()
        if self._doc is None or now - self._doc_read_at > BUDGETS_CACHE_S:
            self._doc, _ = await self.read_budgets()
            self._doc_read_at = now
        return self._doc

    def forget_cache(self) -> None:
        self._doc = None

    async def change_budgets(self, rule: Callable[[BudgetsDoc], BudgetsDoc]) -> tuple[BudgetsDoc, int]:
        """Apply ``rule`` to the stored document compare-and-set (again from a fresh read when
        another writer won); the new document and its revision."""
        _, kv = await self._buckets()
        swap = await cas_upsert(
            kv,
            BUDGETS_KEY,
            lambda doc: rule(BudgetsDoc() if doc is None else doc),
            read=self._stored_budgets,
            parse=BudgetsDoc.model_validate_json,
            dump=BudgetsDoc.to_json_bytes,
            conflict=lambda: Conflict("budgets: being changed concurrently; try again", field="budgets"),
        )
        assert swap.after is not None
        self._doc, self._doc_read_at = swap.after, time.monotonic()
        return swap.after, swap.revision

    # -- holds ----------------------------------------------------------------------------
    async def hold(self, now: datetime, *, target_id: str | None = None) -> Hold | None:
        """Why no new claim or spin-up may start now (the project's pause first, then its
        daily budget, then ``target_id``'s), or None. Reads counters only when such a budget
        is set."""
        doc = await self.budgets()
        paused = pause_hold(doc)
        if paused is not None:
            return paused
        day = day_of(now)
        if doc.project_daily is not None:
            found = project_hold(doc, await self.day_totals(day), now)
            if found is not None:
                return found
        if target_id is not None and target_id in doc.target_daily:
            return target_hold(doc, target_id, await self.day_totals(day, target_id), now)
        return None
