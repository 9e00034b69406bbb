"""``shuttle autonomy show|set|unset``: the project's autonomy policy, what a question's
priority and category make of it (docs/operator.md, Autonomy policy)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shuttle.app import JsonOpt, QuietOpt, command_group, out, state
from shuttle.errors import UsageError
from shuttle.output import emit_json, fields, say
from shuttle.validate import read_data

app = command_group(
    help="The project's autonomy policy: sync, async, bypass or log by priority and category."
)


def _show(body: dict[str, Any]) -> None:
    policy = body.get("policy", {})
    modes = policy.get("modes") or {}
    pairs: list[tuple[str, Any]] = [(priority, modes.get(priority)) for priority in ("P0", "P1", "P2", "P3")]
    for n, rule in enumerate(policy.get("rules") or [], 1):
        match = " ".join(f"{k}={rule[k]}" for k in ("category", "priority") if rule.get(k))
        pairs.append((f"rule {n}", f"{match} -> {rule.get('mode')}"))
    pairs += [
        ("default_priority", policy.get("default_priority")),
        ("bypass_after_s", policy.get("bypass_after_s")),
        ("set by", policy.get("updated_by") if body.get("stored") else "nobody (the default)"),
        ("revision", policy.get("revision")),
    ]
    fields(f"autonomy policy of {body.get('project_id', '')}", pairs)


@app.command("show")
def show_cmd(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """The policy questions follow (the default when none is set)."""
    body = state(ctx).client().get("/api/autonomy")
    if out(ctx, json_out).json:
        emit_json(body)
    else:
        _show(body)


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    path: Annotated[
        str, typer.Argument(help="A policy file, JSON or YAML (- for stdin).", show_default=False)
    ],
    revision: Annotated[
        int | None, typer.Option("--revision", min=0, help="Only if still at this revision (0: none set).")
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Set the policy (admin); questions asked from now on follow it."""
    data = read_data(path, "POLICY")
    if not isinstance(data, dict):
        raise UsageError(f"POLICY {path}: the top level must be a mapping")
    o = out(ctx, json_out, quiet)
    stored = state(ctx).client().put("/api/autonomy", data, revision=revision)
    if o.json:
        emit_json(stored)
    elif not o.quiet:
        _show(stored)


@app.command("unset")
def unset_cmd(
    ctx: typer.Context,
    revision: Annotated[int | None, typer.Option("--revision", min=0)] = None,
    quiet: QuietOpt = False,
) -> None:
    """Forget the project's policy (admin): the default applies again."""
    state(ctx).client().delete("/api/autonomy", revision=revision)
    say("autonomy policy unset (the default applies)", quiet=out(ctx, False, quiet).quiet)
