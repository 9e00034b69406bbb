"""An item's timeline as Weft recorded it: the spans every process made for it, and their
layout as a waterfall (pure: no SDK, no I/O; Shuttle draws it, docs/operations.md, Traces)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import Field, computed_field

from shared.base import LoomModel


class SpanRecord(LoomModel):
    """One finished span of a work item, as kept on the project's traces stream."""

    trace_id: str
    span_id: str
    parent_id: str | None = None
    name: str
    service: str
    kind: str = "internal"
    start_ns: int = Field(ge=0)
    end_ns: int = Field(ge=0)
    status: str = "ok"
    error: str | None = None
    attributes: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


# -- the waterfall (pure) ------------------------------------------------------------
@dataclass(frozen=True)
class Bar:
    """One row of a waterfall: the span, its depth under its parent, and its offset from
    the start of the timeline."""

    span: SpanRecord
    depth: int
    offset_ns: int


def waterfall(spans: Sequence[SpanRecord], origin_ns: int | None = None) -> list[Bar]:
    """Spans in tree order (each after its parent, siblings by start time); a span whose
    parent was not recorded (another process's unexported span, or Shuttle's) is a root.
    Offsets count from ``origin_ns`` (default: the first span's start)."""
    if not spans:
        return []
    origin = min(s.start_ns for s in spans) if origin_ns is None else origin_ns
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for s in spans:
        parent = s.parent_id if s.parent_id in ids and s.parent_id != s.span_id else None
        children.setdefault(parent, []).append(s)
    bars: list[Bar] = []
    seen: set[str] = set()
    stack = [(s, 0) for s in sorted(children.get(None, []), key=_order, reverse=True)]
    while stack:
        span, depth = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        bars.append(Bar(span, depth, span.start_ns - origin))
        stack.extend((c, depth + 1) for c in sorted(children.get(span.span_id, []), key=_order, reverse=True))
        if not stack:  # spans whose parents form a loop are never reached from a root
            stack = [(s, 0) for s in sorted(spans, key=_order, reverse=True) if s.span_id not in seen][-1:]
    return bars


def _order(span: SpanRecord) -> tuple[int, int]:
    return span.start_ns, span.end_ns


# -- the item's phases (pure) ----------------------------------------------------------
PHASE_AFTER: dict[str, str] = {
    "submission": "queued",
    "blocked": "blocked",  # submitted while a dependency was unfinished (see phase_kind)
    "unblocked": "queued",
    "retried": "queued",
    "failure": "queued",  # back in the queue for its next attempt (or dead-lettered next)
    "review": "queued",  # a verdict: back to work (rejected) or on to its end (approved)
    "attempt": "working",
    "answer": "working",
    "question": "waiting on the operator",
    "handed_in": "in review",
}
"""What the item does after each transition of its context tree (``shared.work.context``)."""
FINAL_KINDS = frozenset({"result", "cancelled", "dead_lettered", "expired"})


def phase_kind(kind: str, meta: Mapping[str, str]) -> str:
    """The transition a context node stands for: a submission made while a dependency was
    unfinished starts the item ``blocked``."""
    return "blocked" if kind == "submission" and meta.get("status") == "blocked" else kind


class Phase(LoomModel):
    """A stretch of the item's life between two transitions, named by what it was doing."""

    name: str = Field(description="blocked, queued, working, waiting on the operator or in review")
    start: datetime
    end: datetime

    @computed_field  # type: ignore[prop-decorator]
    @property
    def seconds(self) -> float:
        return round(max(0.0, (self.end - self.start).total_seconds()), 3)


def phases(transitions: Sequence[tuple[datetime, str]], until: datetime | None = None) -> list[Phase]:
    """The item's phases from its transitions (time, context-node kind), oldest first: a wait
    for the operator of minutes is a bar of minutes, not a tick. An open item's last phase
    runs to ``until`` (now); a transition that changes nothing (progress, a checkpoint) does not
    cut a phase; two phases of one name in a row are one."""
    out: list[Phase] = []
    current: tuple[str, datetime] | None = None
    for at, kind in sorted(transitions, key=lambda pair: pair[0]):
        if kind in FINAL_KINDS or kind in PHASE_AFTER:
            if current is not None and (kind in FINAL_KINDS or PHASE_AFTER[kind] != current[0]):
                out.append(Phase(name=current[0], start=current[1], end=at))
                current = None
            if kind in FINAL_KINDS:
                break
            if current is None:
                current = (PHASE_AFTER[kind], at)
    if current is not None and until is not None and until > current[1]:
        out.append(Phase(name=current[0], start=current[1], end=until))
    return out
