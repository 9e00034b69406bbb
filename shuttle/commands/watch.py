"""``shuttle watch <work-id>``: stream one item's events until it is final.

Exit code follows the outcome: 0 completed; 1 dead-lettered, cancelled or
expired (or still running when ``--timeout`` passes)."""

from __future__ import annotations

from typing import Annotated

import typer

from loom import refs
from shuttle.app import QuietOpt, out, state
from shuttle.follow import follow


def register(app: typer.Typer) -> None:
    @app.command("watch")
    def watch(
        ctx: typer.Context,
        work_id: Annotated[
            str,
            typer.Argument(
                help="Work item: its id, a unique start of it, or its task id.", show_default=False
            ),
        ],
        timeout: Annotated[
            float | None, typer.Option("--timeout", min=0.1, help="Give up (exit 1) after this many seconds.")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per event (NDJSON).")] = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Follow a work item live until it completes (exit 0) or fails for good (exit 1)."""
        client = state(ctx).client()
        follow(client, refs.work_id(client, work_id), out(ctx, json_out, quiet), timeout=timeout)
