"""``shuttle stats``: the numbers Weft keeps for this project."""

from __future__ import annotations

from typing import Any

import typer

from shuttle.app import JsonOpt, out, state
from shuttle.output import counts, emit_json, fields


def show_stats(stats: dict[str, Any]) -> None:
    """Nested counters as small tables, scalars as one key/value block."""
    scalars = [(k, v) for k, v in stats.items() if not isinstance(v, dict)]
    if scalars:
        fields("stats", scalars)
    for key, value in stats.items():
        if isinstance(value, dict):
            flat = {k: v for k, v in value.items() if not isinstance(v, dict | list)}
            if flat:
                counts(key, flat)
            for sub, inner in value.items():
                if isinstance(inner, dict):
                    counts(f"{key} by {sub.removeprefix('by_').replace('_', ' ')}", inner)


def register(app: typer.Typer) -> None:
    @app.command("stats")
    def stats(ctx: typer.Context, json_out: JsonOpt = False) -> None:
        """Agents, work, queues and targets in numbers (GET /api/stats)."""
        data = state(ctx).client().get("/api/stats")
        if out(ctx, json_out).json:
            emit_json(data)
        else:
            show_stats(data if isinstance(data, dict) else {"stats": data})
