"""How each kind of record is shown: the columns of a listing and the fields
of a ``show``. Records are plain dicts as Weft returns them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shuttle.output import (
    ago,
    console,
    count_rows,
    escape,
    field_text,
    fields,
    join,
    make_table,
    parse_time,
    short,
    styled,
)

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


def escalation_text(item: dict[str, Any]) -> str:
    """An escalated item's report and question on a few lines (docs/operator.md, Escalation)."""
    escalation = item.get("escalation")
    if not isinstance(escalation, dict):
        return "-"
    report = escalation.get("report") or {}
    if escalation.get("decision"):
        decided = f"{escalation['decision']} by {escalation.get('decided_by')}"
        head = f"{escalation.get('priority')} decided: {decided}"
    else:
        head = (
            f"{escalation.get('priority')} waiting for an answer to question {escalation.get('question_id')}"
        )
    lines = [head]
    for attempt in report.get("attempts") or []:
        seconds = attempt.get("seconds")
        took = f" after {seconds:.1f} s" if isinstance(seconds, int | float) else ""
        lines.append(f"attempt {attempt.get('attempt')}{took}: {one_line(attempt.get('error'))[:200]}")
    if report.get("checkpoint"):
        lines.append(f"last checkpoint {report['checkpoint'][:12]} on {report.get('branch')}")
    return "\n".join(lines)


def one_line(text: Any) -> str:
    """Free text on one line (a description may span paragraphs): runs of whitespace become a space."""
    return " ".join(str(text).split()) if text else "-"


def _work_cells(w: dict[str, Any]) -> dict[str, Any]:
    """Every column a work listing can show, by header."""
    return {
        "id": escape(w.get("id", "")),
        "status": styled(w.get("status")),
        "capability": escape(w.get("capability", "-")),
        "boundary": escape(w.get("boundary", "-")),
        "prio": w.get("priority", "-"),
        "tries": f"{w.get('attempts', 0)}/{w.get('max_attempts', '-')}",
        "assigned": escape(short(w.get("assigned_to"), 8)),
        "updated": ago(w.get("updated_at")),
        "task": escape(w.get("task_id") or "-"),
        "description": escape(one_line(w.get("description"))),
    }


def _work_listing(
    items: Iterable[dict[str, Any]], title: str | None, columns: list[str], drop: list[str]
) -> RenderableType:
    """Work items in ``columns``, the description last (the free text, shortened to fit);
    ``drop`` names the columns to leave out first on a narrow terminal."""
    rows = [[_work_cells(w)[c] for c in columns] for w in items]
    return make_table(title, columns, rows, empty="no work items", drop=[columns.index(c) for c in drop])


def work_table(items: Iterable[dict[str, Any]], title: str | None = "work") -> RenderableType:
    """Work items: the id to copy and, last and shortened to fit, the description people
    recognise, beside the task id. On a narrow terminal the minor columns go first, the task
    id last; the id, status and description always stay."""
    columns = ["id", "status", "capability", "boundary", "prio", "tries", "assigned", "updated", "task"]
    drop = ["boundary", "assigned", "tries", "prio", "updated", "capability", "task"]
    return _work_listing(items, title, [*columns, "description"], drop)


def recent_work_table(items: Iterable[dict[str, Any]], title: str | None = "recent work") -> RenderableType:
    """The fleet view's work: newest first, who holds it, and its description."""
    columns = ["id", "status", "assigned", "updated", "task", "description"]
    return _work_listing(items, title, columns, ["assigned", "updated", "task"])


def work_heading(w: dict[str, Any]) -> RenderableType:
    """One line naming an item the way people know it: id, task id and description,
    cut with an ellipsis at the terminal's edge (``watch`` and ``submit --wait`` start with it)."""
    from rich.text import Text

    line = Text()
    line.append(str(w.get("id", "")), style="bold")
    line.append(f"  {w.get('task_id') or '-'}  ", style="dim")
    line.append(one_line(w.get("description")))
    line.truncate(console().width, overflow="ellipsis")
    return line


WORK_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("what", ("description", "task_id", "capability", "boundary", "priority", "scope",
              "required_agent_type", "preferred_agent_type", "context")),
    ("status", ("status", "progress", "waiting_reason", "question_id", "attempts", "max_attempts",
                "review_round")),
    ("who", ("assigned_to", "submitted_by", "reserved_for", "follow_up_of")),
    ("when", ("created_at", "claimed_at", "updated_at", "finished_at", "deadline")),
    ("result", ("result", "error", "errors", "escalation")),
    ("graph", ("depends_on", "blocked_on", "dependents", "failed_dependency")),
)  # fmt: skip
"""``work show``'s sections, in the order a person asks: what is it, where is it, who has it,
since when, what came of it, what it waits for. Everything else follows under ``more``."""


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {} or value == ""


def work_fields(w: dict[str, Any]) -> None:
    """One item in sections (empty fields left out; ``--json`` has every field)."""
    from rich.table import Table

    values = dict(w)
    values["progress"] = progress_text(w) if w.get("progress") else None
    if w.get("escalation"):
        values["escalation"] = escalation_text(w)
    grid = Table(title=f"work {w.get('id', '')}", title_justify="left", title_style="bold", show_header=False)
    grid.box = None
    grid.add_column(style="bold cyan")
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    placed = {"id", "project_id"}
    groups = [*WORK_GROUPS, ("more", tuple(k for k in w if k not in {"progress"}))]
    for group, keys in groups:
        first = True
        for key in keys:
            if key in placed:
                continue
            placed.add(key)
            value = values.get(key)
            if _empty(value):
                continue
            grid.add_row(group if first else "", escape(key), field_text(value))
            first = False
    console().print(grid)


def graph_tree(graph: dict[str, Any]) -> RenderableType:
    """``GET /api/work/{id}/graph`` as a tree: the item, what it needs (its dependencies,
    down to the first items of the plan) and what it unblocks (its dependents). An item
    reached twice is drawn once and then named as seen."""
    from rich.tree import Tree

    nodes = {n.get("id"): n for n in graph.get("nodes", []) if isinstance(n, dict)}
    needs: dict[str, list[str]] = {}
    unblocks: dict[str, list[str]] = {}
    for edge in graph.get("edges", []):
        if isinstance(edge, dict):
            needs.setdefault(edge.get("dependent", ""), []).append(edge.get("dependency", ""))
            unblocks.setdefault(edge.get("dependency", ""), []).append(edge.get("dependent", ""))

    def label(work_id: str) -> str:
        item = _dict(nodes.get(work_id, {}).get("item"))
        if not item:
            return f"{escape(work_id)} [dim](record gone)[/dim]"
        extra = ""
        if item.get("status") == "blocked" and item.get("blocked_on"):
            extra = f" [dim]waits for {len(item['blocked_on'])}[/dim]"
        elif item.get("error") and item.get("status") in ("dead-lettered", "failed"):
            extra = f" [dim]{escape(short(item['error'], 60))}[/dim]"
        what = escape(one_line(item.get("description"))[:70])
        return (
            f"{escape(work_id)} {styled(item.get('status'))} "
            f"{escape(item.get('task_id') or '-')} [dim]{escape(item.get('capability') or '')}[/dim]{extra}"
            f"\n{what}"  # what the item is, under its ids
        )

    root_id = str(graph.get("root", ""))
    tree = Tree(f"[bold]{label(root_id)}[/bold]")
    for title, onward, relation in (("needs", needs, "ancestor"), ("unblocks", unblocks, "descendant")):
        first = [w for w in onward.get(root_id, []) if nodes.get(w, {}).get("relation") == relation]
        if not first:
            continue
        branch = tree.add(f"[bold]{title}[/bold]")
        seen: set[str] = set()
        stack = [(branch, w) for w in reversed(first)]
        while stack:
            parent, work_id = stack.pop()
            if work_id in seen:
                parent.add(f"{escape(work_id)} [dim](shown above)[/dim]")
                continue
            seen.add(work_id)
            node = parent.add(label(work_id))
            nxt = [w for w in onward.get(work_id, []) if nodes.get(w, {}).get("relation") == relation]
            stack.extend((node, w) for w in reversed(nxt))
    if graph.get("truncated"):
        tree.add("[dim]... more items than one answer holds[/dim]")
    return tree


def agent_table(items: Iterable[dict[str, Any]], title: str | None = "agents") -> RenderableType:
    return make_table(
        title,
        ["id", "handle", "type", "status", "tasks", "heartbeat", "host", "boundaries", "capabilities"],
        [
            (
                escape(a.get("agent_id", "")),
                escape(a.get("handle", "-")),
                escape(a.get("agent_type", "-")),
                styled(a.get("status")),
                f"{a.get('current_tasks', 0)}/{a.get('max_concurrent_tasks', '-')}",
                ago(a.get("last_heartbeat")),
                escape(a.get("hostname") or "-"),
                escape(join(a.get("boundaries"))),
                escape(join(a.get("capabilities"))),
            )
            for a in items
        ],
        empty="no agents",
        drop=(7, 6, 5, 4, 1),
    )


def protocol_agent_table(
    items: Iterable[dict[str, Any]], title: str | None = "other agents on NATS"
) -> RenderableType:
    """Agents of Synadia's Agent Protocol that are not Loom's (docs/interop.md)."""

    def heard(a: dict[str, Any]) -> str:
        if a.get("online") is None:
            return "no heartbeat yet"
        return ago(a.get("last_heartbeat")) if a.get("online") else "silent"

    return make_table(
        title,
        ["session", "kind", "owner", "heard from", "prompt subject", "description"],
        [
            (
                escape(a.get("session_name", "")),
                escape(a.get("agent", "-")),
                escape(a.get("owner", "-")),
                heard(a),
                escape(a.get("prompt_subject", "-")),
                escape(a.get("description") or "-"),
            )
            for a in items
        ],
        empty="no other agent of the protocol answers on this NATS account",
        drop=(5, 4),
    )


def agent_fields(a: dict[str, Any]) -> None:
    fields(f"agent {a.get('agent_id', '')}", list(a.items()))


def target_table(items: Iterable[dict[str, Any]], title: str | None = "targets") -> RenderableType:
    return make_table(
        title,
        ["id", "name", "mechanism", "type", "enabled", "health", "max", "last spin-up", "capabilities"],
        [
            (
                escape(t.get("id", "")),
                escape(t.get("name", "-")),
                escape(t.get("mechanism", "-")),
                escape(t.get("agent_type", "-")),
                "yes" if t.get("enabled") else "[dim]no[/dim]",
                styled(t.get("health")),
                t.get("max_concurrent", "-"),
                ago(t.get("last_spinup_at")),
                escape(join(t.get("capabilities"))),
            )
            for t in items
        ],
        empty="no targets",
        drop=(7, 6, 3, 4),
    )


def target_fields(t: dict[str, Any]) -> None:
    fields(f"target {t.get('name', '')}", list(t.items()))


def spinup_table(
    events: Iterable[dict[str, Any]],
    title: str | None = "recent spin-ups",
    work: Iterable[dict[str, Any]] = (),
) -> RenderableType:
    """Spin-up events seen on the stream (newest first): ``spinup.*`` with the operation in data.
    The work it was started for is named by its description when it is among ``work``."""
    described = {w.get("id"): one_line(w.get("description")) for w in work}
    rows = []
    for event in events:
        data = _dict(event.get("data"))
        op = _dict(data.get("operation")) or data
        rows.append(
            (
                ago(event.get("at")),
                escape(event.get("action", "-")),
                escape(op.get("target_name") or op.get("target_id") or "-"),
                styled(op.get("state")),
                escape(short(op.get("agent_id"))),
                escape(short(described.get(op.get("work_id")) or op.get("work_id"), 30)),
                escape(short(op.get("error"), 40)),
            )
        )
    return make_table(
        title,
        ["when", "event", "target", "state", "agent", "work", "error"],
        rows,
        empty="none seen",
        drop=(4, 5),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stats_view(stats: dict[str, Any]) -> RenderableType:
    """``GET /api/stats`` as a row of small tables: agents by status and type, work by
    status, queue depths by capability, targets by health, spin-ups by state."""
    from rich.columns import Columns

    agents, work = _dict(stats.get("agents")), _dict(stats.get("work"))
    targets, spinups = _dict(stats.get("targets")), _dict(stats.get("spinups"))
    by_type = _dict(agents.get("by_type"))
    agent_statuses = ["online", "busy", "offline"]
    work_rows = count_rows({k: v for k, v in _dict(work.get("by_status")).items() if v})
    work_rows.append(("[bold]total[/bold]", work.get("total", 0)))
    if work.get("waiting_for_agent"):
        work_rows.append(("waiting for an agent", work["waiting_for_agent"]))
    work_rows.append(("dead letters", stats.get("dead_letters", 0)))
    target_rows = count_rows({k: v for k, v in _dict(targets.get("by_health")).items() if v})
    target_rows += [(escape(k), v) for k, v in _dict(targets.get("by_mechanism")).items()]
    target_rows.append(
        ("[bold]enabled/total[/bold]", f"{targets.get('enabled', 0)}/{targets.get('total', 0)}")
    )
    spin_rows = count_rows(_dict(spinups.get("by_state")))
    spin_rows.append(("[bold]total[/bold]", spinups.get("total", 0)))
    spin_rows.append(("mechanism", escape(spinups.get("mechanism", "-"))))
    return Columns(
        [
            make_table(
                "agents",
                ["status", "n"],
                [*count_rows(_dict(agents.get("by_status"))), ("[bold]total[/bold]", agents.get("total", 0))],
                flex=None,
            ),
            make_table(
                "agents by type",
                ["type", *agent_statuses],
                [
                    (escape(t), *(_dict(c).get(s, 0) for s in agent_statuses))
                    for t, c in sorted(by_type.items())
                ],
                empty="none",
                flex=None,
            ),
            make_table("work", ["status", "n"], work_rows, flex=None),
            make_table(
                "queues",
                ["capability", "depth"],
                [(escape(k), v) for k, v in sorted(_dict(stats.get("queue_depths")).items())],
                empty="empty",
                flex=None,
            ),
            make_table("targets by health", ["", "n"], target_rows, flex=None),
            make_table("spin-ups", ["state", "n"], spin_rows, flex=None),
        ],
        padding=(0, 2),
    )


MIN_BAR_WIDTH = 20
OTHER_COLUMNS = 62
"""What the waterfall's other columns take; the bar gets the rest of the terminal's width."""
PHASE_STYLE = {
    "queued": "blue",
    "working": "green",
    "waiting on the operator": "yellow",
    "in review": "magenta",
}


def _bar(offset_ns: int, duration_ns: int, total_ns: int, width: int, mark: str = "█") -> str:
    """A stretch's place on the timeline, ``width`` columns wide."""
    scale = max(total_ns, 1) / width
    start = min(width - 1, int(offset_ns / scale))
    length = max(1, min(width - start, round(duration_ns / scale)))
    return " " * start + mark * length + " " * (width - start - length)


def _unit(total_ns: int) -> tuple[str, float]:
    """Seconds once the timeline is 10 s or longer (a wait for a person is minutes), else ms."""
    return ("s", 1e9) if total_ns >= 10 * 1e9 else ("ms", 1e6)


def trace_waterfall(data: dict[str, Any]) -> RenderableType:
    """``GET /api/work/{id}/trace`` as a waterfall: the item's phases (queued, working, waiting
    on the operator, in review) as bars, then each span (indented under its parent) with its
    process, start, duration and bar, then the item's transitions, all on one time axis as
    wide as the terminal allows."""
    from rich.table import Table

    from shared.trace.timeline import SpanRecord, waterfall

    spans = [SpanRecord.model_validate(s) for s in data.get("spans", []) if isinstance(s, dict)]
    events = [
        (at, e) for e in data.get("events", []) if isinstance(e, dict) and (at := parse_time(e.get("at")))
    ]
    stretches = [
        (start, end, p)
        for p in data.get("phases", [])
        if isinstance(p, dict) and (start := parse_time(p.get("start"))) and (end := parse_time(p.get("end")))
    ]

    def ns(moment: datetime) -> int:
        return int(moment.timestamp() * 1e9)

    starts = [s.start_ns for s in spans] + [ns(at) for at, _ in events] + [ns(a) for a, _, _ in stretches]
    ends = [s.end_ns for s in spans] + starts + [ns(b) for _, b, _ in stretches]
    if not starts:
        return "nothing recorded for this item (was it submitted with tracing off?)"
    origin, total = min(starts), max(ends) - min(starts)
    unit, per = _unit(total)
    width = max(MIN_BAR_WIDTH, console().width - OTHER_COLUMNS)

    def shown(value: int) -> str:
        return f"{value / per:,.1f}"

    trace_id = data.get("trace_id") or "-"
    table = Table(title=f"trace {escape(trace_id)}", title_justify="left", box=None, pad_edge=False)
    for header, justify in (
        ("span", "left"),
        ("process", "left"),
        (f"start {unit}", "right"),
        (unit, "right"),
    ):
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("timeline", no_wrap=True)
    for start, end, phase in stretches:
        name = str(phase.get("name", ""))
        style = PHASE_STYLE.get(name, "white")
        offset, length = ns(start) - origin, ns(end) - ns(start)
        table.add_row(
            f"[bold]{escape(name)}[/bold]",
            "[dim]phase[/dim]",
            shown(offset),
            shown(length),
            f"[{style}]{_bar(offset, length, total, width, '▓')}[/{style}]",
        )
    for bar in waterfall(spans, origin_ns=origin):
        span = bar.span
        name = "  " * bar.depth + escape(span.name)
        style = "red" if span.status == "error" else "cyan"
        table.add_row(
            name
            + (f" [red]({escape(short(span.error or 'error', 40))})[/red]" if span.status == "error" else ""),
            escape(span.service.removeprefix("loom-")),
            shown(bar.offset_ns),
            shown(span.duration_ns),
            f"[{style}]{_bar(bar.offset_ns, span.duration_ns, total, width)}[/{style}]",
        )
    for at, event in sorted(events, key=lambda pair: pair[0]):
        offset = ns(at) - origin
        table.add_row(
            f"[dim]◆ {escape(event.get('kind', ''))}[/dim]",
            f"[dim]{escape(short(event.get('author', ''), 12))}[/dim]",
            shown(offset),
            "",
            f"[yellow]{_bar(offset, 0, total, width, '◆')}[/yellow]",
        )
    if data.get("truncated"):
        table.caption = "more spans were recorded than one answer holds: the first are shown"
    return table


def answer_line(question_id: str, choices: list[str] | None) -> str:
    """The exact command that answers a question (``shared.text.answer_command``)."""
    from shared.text import answer_command

    return answer_command(question_id, choices)


def question_fields(q: dict[str, Any]) -> None:
    """One question whole (``shuttle questions show``): the table cuts long ones."""
    pairs: list[tuple[str, Any]] = [
        ("id", q.get("id")),
        ("status", q.get("status")),
        ("priority", " ".join(x for x in (q.get("priority"), q.get("category"), q.get("mode")) if x)),
        ("asked by", f"{q.get('asked_by_handle') or '-'} ({q.get('asked_by', '')})"),
        ("work", q.get("work_id") or "-"),
        ("asked", q.get("created_at")),
        ("deadline", q.get("deadline") or "-"),
        ("question", q.get("question")),
        ("choices", " | ".join(q.get("choices") or []) or "-"),
        ("default", q.get("default_answer") or "-"),
    ]
    if q.get("deferred_until"):
        pairs.append(("put off until", f"{q['deferred_until']} (by {q.get('deferred_by') or '?'})"))
    if q.get("status") == "open":
        fields(f"question {q.get('id', '')}", pairs)
        console().print(f"answer with:  {escape(answer_line(str(q.get('id', '')), q.get('choices')))}")
        if len(q.get("choices") or []) > 1:
            console().print(f"  (or any of: {escape(' | '.join(q['choices']))})")
        return
    pairs += [
        ("answer", q.get("answer") or "-"),
        ("answered by", q.get("answered_by") or "-"),
        ("resolved", q.get("resolved_at") or "-"),
        ("resolution", q.get("resolution") or "-"),
    ]
    fields(f"question {q.get('id', '')}", pairs)
