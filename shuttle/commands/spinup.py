"""``shuttle spin-up <target>``: start one agent from a target now."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from loom.transport import seg
from shuttle.app import JsonOpt, QuietOpt, out, state
from shuttle.output import emit_json, escape, say, styled


def register(app: typer.Typer) -> None:
    @app.command("spin-up")
    def spin_up(
        ctx: typer.Context,
        target: Annotated[str, typer.Argument(help="Target id or name.", show_default=False)],
        work_id: Annotated[
            str | None, typer.Option("--work-id", help="Hand this work item to the new agent.")
        ] = None,
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Spin an agent up from a target (respects its concurrency cap and cool-down)."""
        body: dict[str, Any] = {"work_id": work_id} if work_id else {}
        op = state(ctx).client().post(f"/api/targets/{seg(target)}/spin-up", body)
        o = out(ctx, json_out, quiet)
        if o.json:
            emit_json(op)
        elif o.quiet:
            typer.echo(op.get("id", ""))
        else:
            say(
                f"spin-up {escape(op.get('id', ''))} of {escape(op.get('target_name', target))}: "
                f"{styled(op.get('state'))} (agent {escape(op.get('agent_id', '-'))})"
            )
