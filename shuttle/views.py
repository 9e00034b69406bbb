"""How each kind of record is shown: the columns of a listing and the fields
of a ``show``. Records are plain dicts as Weft returns them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from shuttle.output import ago, escape, fields, join, make_table, short, styled

if TYPE_CHECKING:
    from rich.console import RenderableType

FINAL_WORK_STATES = frozenset({"completed", "cancelled", "expired", "dead-lettered"})
SUCCESS_STATE = "completed"


def items_of(page: Any) -> list[dict[str, Any]]:
    """The records of a listing page (``{"items": [...]}``) or of a bare list."""
    if isinstance(page, dict):
        page = page.get("items", [])
    return [item for item in page if isinstance(item, dict)] if isinstance(page, list) else []


def progress_text(item: dict[str, Any]) -> str:
    progress = item.get("progress")
    if not isinstance(progress, dict):
        return "-"
    note = progress.get("note") or ""
    return f"{progress.get('percent', 0)}%" + (f" {note}" if note else "")


def work_table(items: Iterable[dict[str, Any]], title: str | None = "work") -> RenderableType:
    return make_table(
        title,
        ["id", "task", "status", "capability", "boundary", "prio", "tries", "assigned", "updated"],
        [
            (
                escape(w.get("id", "")),
                escape(short(w.get("task_id"), 24)),
                styled(w.get("status")),
                escape(w.get("capability", "-")),
                escape(w.get("boundary", "-")),
                w.get("priority", "-"),
                f"{w.get('attempts', 0)}/{w.get('max_attempts', '-')}",
                escape(short(w.get("assigned_to"))),
                ago(w.get("updated_at")),
            )
            for w in items
        ],
        empty="no work items",
    )


def work_fields(w: dict[str, Any]) -> None:
    order = [
        "id",
        "task_id",
        "status",
        "description",
        "capability",
        "boundary",
        "priority",
        "required_agent_type",
        "preferred_agent_type",
        "scope",
        "attempts",
        "max_attempts",
        "assigned_to",
        "submitted_by",
        "deadline",
        "created_at",
        "updated_at",
        "claimed_at",
        "finished_at",
        "waiting_reason",
        "result",
        "error",
        "errors",
        "context",
    ]
    pairs = [(k, w.get(k)) for k in order if k in w]
    pairs.insert(4, ("progress", progress_text(w)))
    pairs += [(k, v) for k, v in w.items() if k not in order and k != "progress"]
    fields(f"work {w.get('id', '')}", pairs)


def agent_table(items: Iterable[dict[str, Any]], title: str | None = "agents") -> RenderableType:
    return make_table(
        title,
        ["id", "handle", "type", "status", "tasks", "capabilities", "boundaries", "host", "heartbeat"],
        [
            (
                escape(a.get("agent_id", "")),
                escape(a.get("handle", "-")),
                escape(a.get("agent_type", "-")),
                styled(a.get("status")),
                f"{a.get('current_tasks', 0)}/{a.get('max_concurrent_tasks', '-')}",
                escape(join(a.get("capabilities"))),
                escape(join(a.get("boundaries"))),
                escape(a.get("hostname") or "-"),
                ago(a.get("last_heartbeat")),
            )
            for a in items
        ],
        empty="no agents",
    )


def agent_fields(a: dict[str, Any]) -> None:
    fields(f"agent {a.get('agent_id', '')}", list(a.items()))


def target_table(items: Iterable[dict[str, Any]], title: str | None = "targets") -> RenderableType:
    return make_table(
        title,
        ["id", "name", "mechanism", "type", "enabled", "health", "capabilities", "max", "last spin-up"],
        [
            (
                escape(t.get("id", "")),
                escape(t.get("name", "-")),
                escape(t.get("mechanism", "-")),
                escape(t.get("agent_type", "-")),
                "yes" if t.get("enabled") else "[dim]no[/dim]",
                styled(t.get("health")),
                escape(join(t.get("capabilities"))),
                t.get("max_concurrent", "-"),
                ago(t.get("last_spinup_at")),
            )
            for t in items
        ],
        empty="no targets",
    )


def target_fields(t: dict[str, Any]) -> None:
    fields(f"target {t.get('name', '')}", list(t.items()))


def spinup_table(items: Iterable[dict[str, Any]], title: str | None = "recent spin-ups") -> RenderableType:
    return make_table(
        title,
        ["id", "target", "state", "reason", "agent", "work", "error", "when"],
        [
            (
                escape(s.get("id", "")),
                escape(s.get("target_name", "-")),
                styled(s.get("state")),
                escape(s.get("reason", "-")),
                escape(short(s.get("agent_id"))),
                escape(short(s.get("work_id"))),
                escape(short(s.get("error"), 40)),
                ago(s.get("created_at")),
            )
            for s in items
        ],
        empty="none",
    )
