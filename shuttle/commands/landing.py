"""``shuttle landing``: the landing queue, who lands now and the latest try of each item
(docs/landing.md)."""

from __future__ import annotations

from typing import Any

import typer

from shuttle.app import JsonOpt, out, state
from shuttle.output import emit_json, say, table


def _last(entry: dict[str, Any]) -> str:
    last = entry.get("last_attempt") or {}
    if not last:
        return "-"
    said = str(last.get("outcome", ""))
    files = last.get("files") or []
    if files:
        said += ": " + ", ".join(files[:5]) + (" ..." if len(files) > 5 else "")
    elif last.get("detail"):
        said += ": " + str(last["detail"]).strip().splitlines()[-1][:80]
    return said


def _status(entry: dict[str, Any]) -> str:
    """Its status, and what it waits on when it is off the landers' queue."""
    if entry.get("question_id"):
        return f"{entry['status']}: asks the operator, land this? (question {entry['question_id'][:12]})"
    if entry.get("pull_request"):
        return f"{entry['status']}: pull request {entry['pull_request']}"
    return str(entry["status"])


def register(app: typer.Typer) -> None:
    @app.command("landing")
    def landing(ctx: typer.Context, json_out: JsonOpt = False) -> None:
        """The landing queue: items being landed, then waiting in the order landers take
        them, with their failures and latest try (GET /api/landing)."""
        body = state(ctx).client().get("/api/landing")
        if out(ctx, json_out).json:
            emit_json(body)
            return
        lock = body.get("lock")
        target = body.get("target", "")
        if lock:
            say(f"landing on {target} now: lander {lock['holder']} ({len(lock.get('items') or [])} item(s))")
        else:
            say(f"nobody is landing on {target} now")
        rows = [
            (
                e["work_id"][:12],
                e["task_id"],
                _status(e),
                e.get("branch") or "-",
                e.get("failures", 0),
                _last(e),
                e.get("description", ""),
            )
            for e in body.get("queue", [])
        ]
        table(
            "landing queue",
            ["id", "task", "status", "branch", "failures", "last try", "description"],
            rows,
            empty="nothing waits to land",
        )
