"""``shuttle projects``: every project with data on Weft's NATS account."""

from __future__ import annotations

import typer

from shuttle.app import JsonOpt, QuietOpt, out, state
from shuttle.output import emit_json, escape, table
from shuttle.views import items_of


def register(app: typer.Typer) -> None:
    @app.command("projects")
    def projects(ctx: typer.Context, json_out: JsonOpt = False, quiet: QuietOpt = False) -> None:
        """Projects Weft can see, which is its default and which it serves (GET /api/stats/projects)."""
        data = state(ctx).client().get("/api/stats/projects")
        o = out(ctx, json_out, quiet)
        if o.json:
            emit_json(data)
            return
        rows = items_of(data.get("projects", []) if isinstance(data, dict) else data)
        if o.quiet:
            for row in rows:
                typer.echo(row.get("project_id", ""))
            return
        table(
            "projects",
            ["project", "default", "served", "streams", "buckets"],
            [
                (
                    escape(r.get("project_id", "-")),
                    "yes" if r.get("default") else "",
                    "yes" if r.get("served") else "",
                    len(r.get("streams") or []),
                    len(r.get("buckets") or []),
                )
                for r in rows
            ],
            empty="no projects",
            flex=None,
        )
