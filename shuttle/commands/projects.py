"""``shuttle projects``: every project Weft knows of, with its counts."""

from __future__ import annotations

from typing import Any

import typer

from shuttle.app import JsonOpt, QuietOpt, out, state
from shuttle.output import emit_json, escape, table
from shuttle.views import items_of


def register(app: typer.Typer) -> None:
    @app.command("projects")
    def projects(ctx: typer.Context, json_out: JsonOpt = False, quiet: QuietOpt = False) -> None:
        """Projects with agents and work (GET /api/stats/projects)."""
        data = state(ctx).client().get("/api/stats/projects")
        o = out(ctx, json_out, quiet)
        if o.json:
            emit_json(data)
            return
        rows: list[dict[str, Any]] = items_of(data.get("projects", data) if isinstance(data, dict) else data)
        if o.quiet:
            for row in rows:
                typer.echo(row.get("project_id", ""))
            return
        columns = sorted(
            {k for row in rows for k, v in row.items() if not isinstance(v, dict | list)} - {"project_id"}
        )
        table(
            "projects",
            ["project", *columns],
            [(escape(r.get("project_id", "-")), *(escape(r.get(c, "-")) for c in columns)) for r in rows],
            empty="no projects",
        )
