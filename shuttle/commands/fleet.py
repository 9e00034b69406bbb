"""``shuttle fleet``: the whole fleet on one screen (agents by status and type,
work by status and queue, targets and their health, spin-ups); ``--watch``
redraws it whenever Weft's WebSocket reports a change."""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Annotated, Any

import typer

from loom.transport import WeftClient
from shuttle.app import out, state
from shuttle.listing import fetch
from shuttle.output import console, emit_json, escape
from shuttle.views import agent_table, recent_work_table, spinup_table, stats_view, target_table

if TYPE_CHECKING:
    from rich.console import RenderableType

PAGE = 1000
TOPICS = ("work", "agents", "targets", "stats")
RECENT_SPINUPS = 10
RECENT_WORK = 10


def collect(client: WeftClient) -> dict[str, Any]:
    """The ``--json`` document: /api/stats as Weft reports it, every agent and target, and
    the newest work items."""
    stats = client.get("/api/stats")
    agents = fetch(client, "/api/agents", {}, limit=PAGE, cursor=None, follow=True)["items"]
    targets = fetch(client, "/api/targets", {}, limit=PAGE, cursor=None, follow=True)["items"]
    work = fetch(client, "/api/work", {}, limit=RECENT_WORK, cursor=None, follow=False)["items"]
    return {
        "project_id": stats.get("project_id"),
        "stats": stats,
        "agents": agents,
        "targets": targets,
        "work": work,
    }


def render(data: dict[str, Any], url: str, spinups: list[dict[str, Any]] | None = None) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    header = Text.from_markup(
        f"[bold]Loom fleet[/bold]  project [cyan]{escape(data.get('project_id') or '-')}[/cyan]  "
        f"[dim]{escape(url)}  {time.strftime('%H:%M:%S')}[/dim]"
    )
    parts: list[RenderableType] = [header]
    hold = data["stats"].get("budget_hold")
    if hold:
        parts.append(Text(f"On hold: {hold}", style="bold yellow"))
    parts += [
        stats_view(data["stats"]),
        agent_table(data["agents"]),
        target_table(data["targets"]),
        recent_work_table(data["work"]),
    ]
    if spinups is not None:
        parts.append(spinup_table(spinups, work=data["work"]))
    return Group(*parts)


def register(app: typer.Typer) -> None:
    @app.command("fleet")
    def fleet(
        ctx: typer.Context,
        watch: Annotated[
            bool, typer.Option("--watch", "-w", help="Redraw live from Weft's WebSocket (Ctrl-C stops).")
        ] = False,
        json_out: Annotated[
            bool, typer.Option("--json", help="One JSON document (with --watch: one per change, NDJSON).")
        ] = False,
    ) -> None:
        """Agents by status and type, work by status and queue, targets and health, spin-ups."""
        client = state(ctx).client()
        o = out(ctx, json_out)
        if not watch:
            data = collect(client)
            if o.json:
                emit_json(data)
            else:
                console().print(render(data, client.base_url))
            return
        _watch(client, as_json=o.json)


def _watch(client: WeftClient, *, as_json: bool) -> None:
    """Subscribe first, then draw; after each burst of events read everything again."""
    from loom.events import EventStream

    recent: deque[dict[str, Any]] = deque(maxlen=RECENT_SPINUPS)
    with EventStream(client, TOPICS, {"interval_s": 5}) as stream:
        data = collect(client)
        if as_json:
            _print_json(data)
            for dirty in _bursts(stream, recent):
                if dirty:
                    data = collect(client)
                    _print_json(data)
            return
        if not console().is_terminal:  # piped: append one screen per change instead of redrawing
            console().print(render(data, client.base_url, list(recent)))
            for dirty in _bursts(stream, recent):
                if dirty:
                    data = collect(client)
                    console().print(render(data, client.base_url, list(recent)))
            return
        from rich.live import Live

        with Live(render(data, client.base_url, list(recent)), console=console(), auto_refresh=False) as live:
            for dirty in _bursts(stream, recent):
                if dirty:
                    data = collect(client)
                live.update(render(data, client.base_url, list(recent)), refresh=True)


def _bursts(stream: Any, recent: deque[dict[str, Any]]) -> Any:
    """Yield True once a burst of changes has settled, False on a quiet tick (to redraw times)."""
    dirty = False
    for frame in stream.frames(timeout=0.5):
        if frame is None:
            yield dirty
            dirty = False
            continue
        if frame.get("type") == "event":
            event = frame.get("event") or {}
            if event.get("kind") == "spinup":
                recent.appendleft(event)
            dirty = True
        elif frame.get("type") in ("stats", "lagged"):
            dirty = True


def _print_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()
