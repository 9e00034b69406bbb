"""An item's timeline as Weft recorded it: the spans every process made for it, and their
layout as a waterfall (pure: no SDK, no I/O; Shuttle draws it, docs/operations.md, Traces)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

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
