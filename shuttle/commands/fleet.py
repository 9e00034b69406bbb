"""``shuttle fleet``: the whole fleet on one screen (agents by status and type,
work by status and queue, targets and their health, recent spin-ups);
``--watch`` redraws it whenever Weft's WebSocket reports a change."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shuttle.app import JsonOpt, out, state
from shuttle.client import WeftClient
from shuttle.listing import fetch
from shuttle.output import console, count_rows, emit_json, escape, make_table
from shuttle.views import agent_table, items_of, spinup_table, target_table

if TYPE_CHECKING:
    from rich.console import RenderableType

MAX_AGENTS = 1000
TOPICS = ("work", "agents", "targets", "stats")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def collect(client: WeftClient) -> dict[str, Any]:
    """One consistent-enough picture from /api/stats, /api/agents and /api/targets."""
    stats = _dict(client.get("/api/stats"))
    agents = fetch(client, "/api/agents", {}, limit=MAX_AGENTS, cursor=None, follow=True)["items"]
    targets = fetch(client, "/api/targets", {}, limit=1000, cursor=None, follow=True)["items"]
    agent_stats = _dict(stats.get("agents"))
    work_stats = _dict(stats.get("work"))
    target_stats = _dict(stats.get("targets"))
    spinups = stats.get("recent_spinups") or _dict(stats.get("spinups")).get("recent") or []
    return {
        "project_id": stats.get("project_id"),
        "agents": {
            "total": len(agents),
            "by_status": dict(Counter(str(a.get("status")) for a in agents)),
            "by_type": dict(Counter(str(a.get("agent_type")) for a in agents)),
            "items": agents,
        },
        "work": {
            "by_status": _dict(work_stats.get("by_status")),
            "by_queue": work_stats.get("queues", work_stats.get("by_queue", {})),
        },
        "targets": {
            "total": len(targets),
            "by_health": dict(Counter(str(t.get("health")) for t in targets)),
            "items": targets,
        },
        "spinups": items_of(spinups) if isinstance(spinups, list | dict) else [],
        "stats": stats,
        "agent_stats": agent_stats,
        "target_stats": target_stats,
    }


def render(data: dict[str, Any], url: str) -> RenderableType:
    from rich.columns import Columns
    from rich.console import Group
    from rich.text import Text

    agents, work, targets = data["agents"], data["work"], data["targets"]
    queues = work["by_queue"]
    queue_rows = (
        [(escape(k), v) for k, v in queues.items()]
        if isinstance(queues, dict)
        else [
            (escape(q.get("name") or q.get("subject") or "-"), q.get("depth", q.get("pending", "-")))
            for q in queues
        ]
    )
    header = Text.from_markup(
        f"[bold]Loom fleet[/bold]  project [cyan]{escape(data.get('project_id') or '-')}[/cyan]  "
        f"[dim]{escape(url)}  {time.strftime('%H:%M:%S')}[/dim]"
    )
    summary = Columns(
        [
            make_table("agents by status", ["status", "n"], count_rows(agents["by_status"]), empty="none"),
            make_table(
                "agents by type",
                ["type", "n"],
                [(escape(k), v) for k, v in agents["by_type"].items()],
                empty="none",
            ),
            make_table("work by status", ["status", "n"], count_rows(work["by_status"]), empty="none"),
            make_table("queues", ["queue", "depth"], queue_rows, empty="empty"),
            make_table("targets by health", ["health", "n"], count_rows(targets["by_health"]), empty="none"),
        ],
        padding=(0, 2),
    )
    return Group(
        header,
        summary,
        agent_table(agents["items"]),
        target_table(targets["items"]),
        spinup_table(data["spinups"][:10]),
    )


def public(data: dict[str, Any]) -> dict[str, Any]:
    """The ``--json`` document: stable top-level keys."""
    return {k: data[k] for k in ("project_id", "agents", "work", "targets", "spinups", "stats")}


def register(app: typer.Typer) -> None:
    @app.command("fleet")
    def fleet(
        ctx: typer.Context,
        watch: Annotated[
            bool, typer.Option("--watch", "-w", help="Keep the screen live (Ctrl-C to stop).")
        ] = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Agents, work, queues, targets and spin-ups on one screen."""
        st = state(ctx)
        client = st.client()
        o = out(ctx, json_out)
        if not watch:
            data = collect(client)
            if o.json:
                emit_json(public(data))
            else:
                console().print(render(data, client.base_url))
            return
        if o.json:
            _watch_json(client)
        else:
            _watch_screen(client)


def _watch_screen(client: WeftClient) -> None:
    from rich.live import Live

    from shuttle.stream import EventStream

    with EventStream(client, TOPICS) as stream:
        data = collect(client)
        with Live(render(data, client.base_url), console=console(), auto_refresh=False, screen=False) as live:
            dirty = False
            for event in stream.events(timeout=1.0):
                if event is not None:
                    dirty = True
                    continue
                if dirty:  # redraw once the burst of events is over (or every idle second)
                    data = collect(client)
                    dirty = False
                live.update(render(data, client.base_url), refresh=True)


def _watch_json(client: WeftClient) -> None:
    """NDJSON: one fleet document now and one after each burst of events."""
    import json
    import sys

    from shuttle.stream import EventStream

    with EventStream(client, TOPICS) as stream:
        sys.stdout.write(json.dumps(public(collect(client)), default=str) + "\n")
        sys.stdout.flush()
        dirty = False
        for event in stream.events(timeout=0.5):
            if event is not None:
                dirty = True
            elif dirty:
                sys.stdout.write(json.dumps(public(collect(client)), default=str) + "\n")
                sys.stdout.flush()
                dirty = False
