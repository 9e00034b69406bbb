"""A spin-up target's circuit breaker (docs/spinup.md, Circuit breaker): a target whose
starts failed (or timed out) ``failures`` times within ``window_s`` is disabled, so
routing stops trying it, and the operator is told (``target.tripped``, a notification).
Pure: the manager counts from the project's spin-up records and trips the target
compare-and-set, so of several replicas seeing the same failures one trips it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from shared.models import SpinupState
from weft.spinup.store import SpinupRecord

FAILED_STATES = frozenset({SpinupState.FAILED, SpinupState.TIMED_OUT})


def recent_failures(records: Iterable[SpinupRecord], target_id: str, now: datetime, window_s: float) -> int:
    """The target's starts that failed or timed out within the window (by when they ended)."""
    since = now - timedelta(seconds=window_s)
    return sum(
        1
        for r in records
        if r.op.target_id == target_id and r.op.state in FAILED_STATES and r.op.updated_at >= since
    )


def trips(failures: int, threshold: int) -> bool:
    """Whether that many recent failures trip the breaker (a threshold of 0: never)."""
    return threshold > 0 and failures >= threshold


def tripped_reason(failures: int, window_s: float) -> str:
    minutes = window_s / 60
    span = f"{minutes:g} minute{'s' if minutes != 1 else ''}" if window_s >= 60 else f"{window_s:g} s"
    return f"{failures} starts failed or timed out within {span}; disabled so routing stops trying it"
