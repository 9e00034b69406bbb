"""Everything Shuttle prints: JSON for machines, rich tables for people.

``--json`` writes exactly one JSON document to stdout and nothing else; tables
and chatter go through a rich console created on first use (rich honours
NO_COLOR and turns colour off when stdout is not a terminal).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loom.events import parse_time as parse_time

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

_console: Console | None = None
_no_color = False

STATUS_STYLES = {
    "online": "green",
    "busy": "yellow",
    "offline": "dim",
    "completed": "green",
    "queued": "cyan",
    "submitted": "cyan",
    "blocked": "magenta",
    "claimed": "yellow",
    "in-progress": "yellow",
    "in-review": "blue",
    "waiting-on-operator": "magenta",
    "open": "magenta",
    "answered": "green",
    "reviewing": "yellow",
    "landing": "blue",
    "merging": "yellow",
    "failed": "red",
    "dead-lettered": "red",
    "cancelled": "dim",
    "expired": "dim",
    "healthy": "green",
    "unhealthy": "red",
    "unknown": "dim",
    "registered": "green",
    "running": "green",
    "stopped": "dim",
    "timed-out": "red",
}


FREE_TEXT_WIDTH = 40
"""Columns are left out before the free-text column of a table gets narrower than this."""


def set_no_color(value: bool) -> None:
    global _no_color, _console
    _no_color = value
    _console = None


def console() -> Console:
    global _console
    if _console is None:
        import os

        from rich.console import Console

        width = None
        if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
            width = 160  # piped or captured: do not squeeze tables into 80 columns
        _console = Console(no_color=_no_color or None, highlight=False, soft_wrap=False, width=width)
    return _console


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def error_line(message: str) -> None:
    """The one line an expected failure prints (stderr, no markup)."""
    sys.stderr.write(f"shuttle: error: {message}\n")
    sys.stderr.flush()


def say(message: str, *, quiet: bool = False) -> None:
    """Human chatter on stdout (suppressed by ``-q``); rich markup allowed."""
    if not quiet:
        console().print(message)


def escape(text: object) -> str:
    from rich.markup import escape as _escape

    return _escape(str(text))


def styled(value: object) -> str:
    text = "-" if value is None or value == "" else str(value)
    style = STATUS_STYLES.get(text)
    return f"[{style}]{escape(text)}[/{style}]" if style else escape(text)


def ago(value: Any, now: datetime | None = None) -> str:
    """``2m ago`` / ``in 5m`` for ISO timestamps; ``-`` when absent."""
    moment = parse_time(value)
    if moment is None:
        return "-"
    seconds = int(((now or datetime.now(UTC)) - moment).total_seconds())
    future = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            text = f"{seconds // size}{unit}"
            break
    else:
        text = f"{seconds}s"
    return f"in {text}" if future else f"{text} ago"


def short(value: Any, width: int = 12) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= width else text[:width]


def join(values: Any) -> str:
    if not values:
        return "-"
    if isinstance(values, list | tuple | set):
        return ",".join(str(v) for v in values)
    return str(values)


def make_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    empty: str = "nothing to show",
    flex: int | None = -1,
    drop: Sequence[int] = (),
) -> RenderableType:
    """Rows (values may carry rich markup) as a table, or a dim ``empty`` line when none.

    Every column keeps the width of its widest cell (ids are never cut: people copy
    them into the next command) except ``flex``, the free-text column shortened with
    an ellipsis, on one line. While the table would not fit the terminal with that column at
    :data:`FREE_TEXT_WIDTH`, the columns in ``drop`` are left out, in that order."""
    cells = [[str(cell) for cell in row] for row in rows]
    from rich.table import Table
    from rich.text import Text

    if not cells:
        label = f"[bold]{escape(title)}[/bold]: " if title else ""
        return Text.from_markup(f"{label}[dim]{escape(empty)}[/dim]")
    flexible = None if flex is None else range(len(columns))[flex]
    widths = []
    for index, column in enumerate(columns):
        if index == flexible:
            widths.append(min(len(column), 8))
        else:
            widths.append(max([len(column), *(Text.from_markup(row[index]).cell_len for row in cells)]))
    shown = list(range(len(columns)))
    budget = console().width
    # a minor column stays only while the free text keeps a readable width beside it
    wanted = list(widths)
    if flexible is not None:
        longest = max(Text.from_markup(row[flexible]).cell_len for row in cells)
        wanted[flexible] = max(len(columns[flexible]), min(longest, FREE_TEXT_WIDTH))
    for index in drop:
        if sum(wanted[i] + 3 for i in shown) + 1 <= budget:
            break
        shown.remove(index)
    # what is left for the free-text column (each column takes its width plus 3: padding
    # and a rule; plus the table's left edge): one line, cut with an ellipsis
    room = budget - 1 - sum(widths[i] + 3 for i in shown if i != flexible) - 3
    grid = Table(title=title, title_justify="left", title_style="bold", header_style="bold")
    for index in shown:
        if index == flexible:
            grid.add_column(
                columns[index],
                no_wrap=True,
                overflow="ellipsis",
                min_width=widths[index],
                max_width=max(widths[index], room),
            )
        else:
            grid.add_column(columns[index], no_wrap=True, min_width=widths[index])
    for row in cells:
        grid.add_row(*(row[i] for i in shown))
    return grid


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    empty: str = "nothing to show",
    flex: int | None = -1,
    drop: Sequence[int] = (),
) -> None:
    console().print(make_table(title, columns, rows, empty=empty, flex=flex, drop=drop))


def fields(title: str | None, pairs: Iterable[tuple[str, Any]]) -> None:
    """A two-column key/value view for ``show`` commands."""
    from rich.table import Table

    grid = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None)
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(escape(key), field_text(value))
    console().print(grid)


def field_text(value: Any) -> str:
    """One field's value as a ``show`` prints it: JSON for a dict or list, else styled."""
    if isinstance(value, dict | list):
        return escape(json.dumps(value, ensure_ascii=False, default=str)) if value else "-"
    return styled(value)


def count_rows(mapping: dict[str, Any] | None) -> list[tuple[str, Any]]:
    return [(styled(k), v) for k, v in (mapping or {}).items()]
