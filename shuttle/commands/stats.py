"""``shuttle stats``: the numbers Weft keeps for this project."""

from __future__ import annotations

import typer

from shuttle.app import JsonOpt, out, state
from shuttle.output import console, emit_json, escape
from shuttle.views import stats_view


def register(app: typer.Typer) -> None:
    @app.command("stats")
    def stats(ctx: typer.Context, json_out: JsonOpt = False) -> None:
        """Agents, work, queues, targets and spin-ups in numbers (GET /api/stats)."""
        data = state(ctx).client().get("/api/stats")
        if out(ctx, json_out).json:
            emit_json(data)
            return
        console().print(f"[bold]project[/bold] [cyan]{escape(data.get('project_id', '-'))}[/cyan]")
        console().print(stats_view(data))
