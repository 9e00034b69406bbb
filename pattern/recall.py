"""Recall: filter the index, order by category rank then newest, summarise.

Cost grows with ``limit`` (and with how many memories a filter rejects on the
way), not with the size of the store: the index is walked in recall order and
the walk stops one past ``limit``. A tag filter starts from the smallest tag
set instead. Counts come from counters, not a scan.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pattern.access import Viewer
from pattern.index import Entry, MemoryIndex
from pattern.inputs import RecallInput
from pattern.keys import KeyParts
from pattern.models import CATEGORY_RANK, Category, Scope
from pattern.results import MemoryView, RecallCounts, RecallResult

ALL_SCOPES = tuple(Scope)
ALL_CATEGORIES = tuple(Category)
SNIPPET_CHARS = 200
TAG_SET_SORT_FACTOR = 8
"""Sort a tag's memories when there are at most this many per requested memory; otherwise walk."""


def _matches(entry: Entry, req: RecallInput, scopes: set[Scope], needle: str | None, now: datetime) -> bool:
    r = entry.record
    if entry.parts.scope not in scopes:
        return False
    if not (req.priority_min <= r.priority <= req.priority_max):
        return False
    if r.expires_at is not None and r.expires_at <= now:
        return False
    if req.created_after is not None and r.created_at < req.created_after:
        return False
    if req.created_before is not None and r.created_at > req.created_before:
        return False
    if req.updated_after is not None and r.updated_at < req.updated_after:
        return False
    if req.updated_before is not None and r.updated_at > req.updated_before:
        return False
    if req.tags and not set(req.tags).issubset(r.tags):
        return False
    return needle is None or needle in entry.text


def recall(
    index: MemoryIndex,
    viewer: Viewer,
    req: RecallInput,
    now: datetime,
    summary_bytes: int,
    picked_out: list[Entry] | None = None,
) -> RecallResult:
    """The memories that match, in recall order; ``picked_out`` receives their entries
    (the caller counts them as read)."""
    index.expire(now)
    scopes = set(req.scopes or ALL_SCOPES)
    categories = set(req.categories or ALL_CATEGORIES)
    needle = req.search.lower() if req.search else None

    candidates: Iterable[Entry]
    smallest = min((index.tag_count(t) for t in req.tags), default=None)
    if smallest is not None and smallest <= TAG_SET_SORT_FACTOR * req.limit:
        # A selective tag: sorting its few memories beats walking past many others.
        uids = index.tagged(req.tags)
        found = [e for e in (index.entry(u) for u in uids or ()) if e is not None]
        found = [e for e in found if e.parts.category in categories]
        found.sort(key=lambda e: (CATEGORY_RANK[e.parts.category], e.sort_key))
        candidates = found
    else:
        candidates = index.walk(scopes, categories)

    picked: list[Entry] = []
    has_more = False
    for entry in candidates:
        if not viewer.can_read(entry.parts) or not _matches(entry, req, scopes, needle, now):
            continue
        if len(picked) == req.limit:
            has_more = True
            break
        picked.append(entry)

    if picked_out is not None:
        picked_out.extend(picked)
    views = [MemoryView.of(e.record, viewer.agent_id) for e in picked]
    counts = _counts(index, viewer, scopes, categories, len(views), has_more)
    return RecallResult(memories=views, summary=summarize(views, counts, summary_bytes), counts=counts)


def _counts(
    index: MemoryIndex,
    viewer: Viewer,
    scopes: set[Scope],
    categories: set[Category],
    returned: int,
    has_more: bool,
) -> RecallCounts:
    by_category: dict[str, int] = {}
    by_scope: dict[str, int] = {}
    visible = 0
    for (scope, owner, category), n in index.counts().items():
        if scope not in scopes or category not in categories:
            continue
        if not viewer.can_read(KeyParts(scope, owner, category, "")):
            continue
        visible += n
        by_category[category.value] = by_category.get(category.value, 0) + n
        by_scope[scope.value] = by_scope.get(scope.value, 0) + n
    expired = sum(
        n
        for (scope, owner, category), n in index.expired_counts().items()
        if scope in scopes
        and category in categories
        and viewer.can_read(KeyParts(scope, owner, category, ""))
    )
    return RecallCounts(
        returned=returned,
        has_more=has_more,
        visible=visible,
        by_category=by_category,
        by_scope=by_scope,
        expired_recently=expired,
        expired_window_s=int(index.expired_window_s),
    )


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _tail(rest: int) -> str:
    return f"… {rest} more in the structured result"


def summarize(views: list[MemoryView], counts: RecallCounts, max_bytes: int) -> str:
    """A readable digest: a header line, then one line per memory, cut to ``max_bytes``."""
    parts = [f"{counts.visible} visible", f"{counts.returned} returned"]
    if counts.has_more:
        parts.append("more match")
    if counts.expired_recently:
        parts.append(f"{counts.expired_recently} expired recently")
    header = "Memories: " + ", ".join(parts) + "."
    if not views:
        header += " Nothing matched."
    lines = [header]
    used = len(header.encode("utf-8"))
    for i, view in enumerate(views):
        tags = (" #" + " #".join(view.tags)) if view.tags else ""
        who = "" if view.own else f" by {view.handle or view.agent_id[:8]}"
        line = (
            f"- [{view.category.value}/{view.scope.value} p{view.priority}] {view.id}{who}: "
            f"{_one_line(view.content, SNIPPET_CHARS)}{tags}"
        )
        after = len(views) - i - 1
        reserve = len(_tail(after).encode("utf-8")) + 1 if after else 0
        size = len(line.encode("utf-8")) + 1
        if used + size + reserve > max_bytes:
            lines.append(_tail(len(views) - i))
            break
        lines.append(line)
        used += size
    text = "\n".join(lines)
    encoded = text.encode("utf-8")
    if len(encoded) > max_bytes:
        text = encoded[: max_bytes - 3].decode("utf-8", errors="ignore") + "…"
    return text
