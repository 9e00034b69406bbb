"""``shuttle version``: Shuttle's version and, when reachable, Weft's."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from shuttle import __version__
from shuttle.app import JsonOpt, out, state
from shuttle.output import emit_json


def register(app: typer.Typer) -> None:
    @app.command("version")
    def version(
        ctx: typer.Context,
        json_out: JsonOpt = False,
        server: Annotated[
            bool, typer.Option("--server", help="Also ask Weft's /health for its version.")
        ] = False,
    ) -> None:
        """Print Shuttle's version (and Weft's with --server)."""
        data: dict[str, Any] = {"shuttle": __version__}
        if server:
            st = state(ctx)
            health = st.client().get("/health")
            data["weft"] = health.get("version") if isinstance(health, dict) else None
            data["api_url"] = st.settings().api_url
        if out(ctx, json_out).json:
            emit_json(data)
            return
        sys.stdout.write(f"shuttle {__version__}\n")
        if server:
            sys.stdout.write(f"weft {data['weft'] or 'unknown'} at {data['api_url']}\n")
