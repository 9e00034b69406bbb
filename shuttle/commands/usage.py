"""``shuttle usage`` (what the work used, added up) and ``shuttle budget show|set``
(the project's, a target's or a work item's limits); see docs/operations.md."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from loom.transport import seg
from shuttle.app import JsonOpt, command_group, out, state
from shuttle.errors import UsageError
from shuttle.output import console, emit_json, escape, fields, make_table

GROUPS = ("project", "item", "agent", "target", "model", "day")

budget_app = command_group(help="Show and change budgets: the project's and targets' daily ones, an item's.")
budget_app.info.no_args_is_help = True


def _limit(budget: Any) -> str:
    if not isinstance(budget, dict):
        return "none"
    parts = []
    if budget.get("cost") is not None:
        parts.append(f"cost {budget['cost']:g}")
    if budget.get("tokens") is not None:
        parts.append(f"{budget['tokens']} tokens")
    return ", ".join(parts) or "none"


def _totals(t: Any) -> str:
    t = t if isinstance(t, dict) else {}
    tokens = int(t.get("input_tokens", 0)) + int(t.get("output_tokens", 0))
    return f"cost {float(t.get('cost', 0.0)):g}, {tokens} tokens, {t.get('reports', 0)} report(s)"


def show_budgets(data: dict[str, Any]) -> None:
    fields(
        "budgets",
        [
            ("project", escape(data.get("project_id", "-"))),
            ("daily budget", _limit(data.get("project_daily"))),
            (f"used {escape(data.get('day', ''))}", _totals(data.get("today"))),
            ("on hold", escape(data.get("hold") or "no")),
            ("revision", data.get("revision", 0)),
        ],
    )
    targets = data.get("target_daily") or {}
    if targets:
        console().print(
            make_table(
                "target daily budgets",
                ["target", "budget"],
                [(escape(k), _limit(v)) for k, v in targets.items()],
            )
        )


def register(app: typer.Typer) -> None:
    @app.command("usage")
    def usage(
        ctx: typer.Context,
        by: Annotated[
            str, typer.Option("--by", help="project, item, agent, target, model or day.")
        ] = "project",
        since: Annotated[str | None, typer.Option("--since", help="First UTC day, YYYY-MM-DD.")] = None,
        until: Annotated[str | None, typer.Option("--until", help="Last UTC day, YYYY-MM-DD.")] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Tokens and cost the project's work reported, added up (GET /api/usage)."""
        if by not in GROUPS:
            raise UsageError(f"--by: must be one of {', '.join(GROUPS)}")
        data = state(ctx).client().get("/api/usage", by=by, since=since, until=until)
        if out(ctx, json_out).json:
            emit_json(data)
            return
        rows = [
            (
                escape(r["key"]),
                r["input_tokens"],
                r["output_tokens"],
                f"{r['cost']:g}",
                r["reports"],
            )
            for r in data.get("rows", [])
        ]
        console().print(
            make_table(
                f"usage by {by}",
                [by, "input tokens", "output tokens", "cost", "reports"],
                rows,
                empty="no usage reported",
            )
        )
        day = escape(data.get("day", ""))
        console().print(f"total: {_totals(data.get('total'))}; today ({day}): {_totals(data.get('today'))}")

    app.add_typer(budget_app, name="budget")


@budget_app.command("show")
def budget_show(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """The project's and targets' daily budgets, today's usage, and whether work is on hold."""
    data = state(ctx).client().get("/api/budgets")
    if out(ctx, json_out).json:
        emit_json(data)
        return
    show_budgets(data)


@budget_app.command("set")
def budget_set(
    ctx: typer.Context,
    cost: Annotated[
        float | None, typer.Option("--cost", help="Cost limit (the project's currency unit).")
    ] = None,
    tokens: Annotated[int | None, typer.Option("--tokens", help="Token limit (input plus output).")] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="A target's daily budget (id or name).")
    ] = None,
    work: Annotated[str | None, typer.Option("--work", help="A work item's budget (its id).")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the budget (no limit).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Set the project's daily budget (default), a target's (--target) or an item's (--work).
    Takes effect at once, on every Weft replica and agent."""
    if target is not None and work is not None:
        raise UsageError("--target and --work: give at most one")
    if clear and (cost is not None or tokens is not None):
        raise UsageError("--clear: cannot be combined with --cost or --tokens")
    if not clear and cost is None and tokens is None:
        raise UsageError("--cost or --tokens is required (or --clear)")
    body = {"cost": cost, "tokens": tokens}
    client = state(ctx).client()
    if work is not None:
        data = client.request("PUT", f"/api/work/{seg(work)}/budget", body=body)
        if out(ctx, json_out).json:
            emit_json(data)
            return
        console().print(f"work {escape(data['id'])}: budget {_limit(data.get('budget'))}")
        return
    path = "/api/budgets/project" if target is None else f"/api/budgets/targets/{seg(target)}"
    data = client.request("PUT", path, body=body)
    if out(ctx, json_out).json:
        emit_json(data)
        return
    show_budgets(data)
