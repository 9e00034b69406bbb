"""Silence by role (docs/operator.md, Silence): work held with no word from its holder for a
while. Pure: Weft's sweep announces what :func:`silent` finds (``work.silent``, a notice),
long before the claim would lapse, since an agent whose Warp keeps its claim alive may
still be stuck.

A worker's silence counts from its last progress report (or its claim); a reviewer's from
its last progress (or the moment it took the review). Each stretch of silence is announced
once: its :func:`quiet_since` moment is part of the announcement's key, and a new report
starts a new stretch.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Final

from shared.models import WorkItem, WorkStatus

WORKING: Final = frozenset({WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS})


def quiet_since(item: WorkItem) -> datetime | None:
    """When its holder last said something (None: nobody holds it as worker or reviewer)."""
    if item.status in WORKING:
        return item.progress.at if item.progress is not None else item.claimed_at
    if item.status is WorkStatus.REVIEWING:
        return item.progress.at if item.progress is not None else item.updated_at
    return None


def silent(
    items: Iterable[WorkItem], now: datetime, work_after_s: float | None, review_after_s: float | None
) -> list[tuple[WorkItem, datetime]]:
    """The held items silent for longer than their role allows (None: that role is not
    watched), each with the moment its silence began; the longest silent first."""
    found: list[tuple[WorkItem, datetime]] = []
    for item in items:
        limit = review_after_s if item.status is WorkStatus.REVIEWING else work_after_s
        since = quiet_since(item)
        if limit is None or since is None:
            continue
        if now - since >= timedelta(seconds=limit):
            found.append((item, since))
    found.sort(key=lambda pair: pair[1])
    return found
