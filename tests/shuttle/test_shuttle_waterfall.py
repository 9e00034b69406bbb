"""Shuttle's trace waterfall drawn from a trace answer (shuttle.views.trace_waterfall): a long
wait for the operator is a long bar in seconds, not a tick, and the bars use the terminal."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from shuttle import output
from shuttle.views import trace_waterfall

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def draw(data: dict[str, object], width: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    screen = Console(file=io.StringIO(), width=width, color_system=None)
    monkeypatch.setattr(output, "console", lambda: screen)
    monkeypatch.setattr("shuttle.views.console", lambda: screen)
    screen.print(trace_waterfall(data))
    text = screen.file.getvalue()  # type: ignore[attr-defined]
    return str(text).splitlines()


def test_a_wait_for_the_operator_is_a_bar_of_its_length_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    phases = [
        {"name": "queued", "start": iso(0), "end": iso(2)},
        {"name": "working", "start": iso(2), "end": iso(5)},
        {"name": "waiting on the operator", "start": iso(5), "end": iso(170)},
        {"name": "working", "start": iso(170), "end": iso(171)},
    ]
    events = [{"at": iso(0), "kind": "submission", "author": "weft-api"}]
    data = {"trace_id": "ab" * 16, "spans": [], "events": events, "phases": phases}
    for width in (100, 160):
        lines = draw(data, width, monkeypatch)
        header = next(line for line in lines if "timeline" in line)
        assert "start s" in header  # seconds: the timeline is minutes long
        waiting = next(line for line in lines if line.startswith("waiting on the operator"))
        working = next(line for line in lines if line.startswith("working"))
        assert "165.0" in waiting and waiting.count("▓") > 10 * working.count("▓") > 0
        assert waiting.count("▓") >= (width - 62) * 0.9  # the bar takes the terminal's width
    marker = next(line for line in draw(data, 160, monkeypatch) if line.startswith("◆ submission"))
    assert marker.count("◆") == 2  # its label and its one mark on the timeline


def test_a_short_trace_stays_in_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    phases = [{"name": "queued", "start": iso(0), "end": iso(0.004)}]
    data = {"trace_id": None, "spans": [], "events": [], "phases": phases}
    header = next(line for line in draw(data, 120, monkeypatch) if "timeline" in line)
    assert "start ms" in header
