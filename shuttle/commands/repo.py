"""``shuttle repo show|set|unset``: the project's repository, where workstreams branch
from and push to (docs/workstreams.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shuttle.app import JsonOpt, QuietOpt, command_group, out, state
from shuttle.output import emit_json, fields, say

app = command_group(help="The project's repository: where each item's branch and worktree come from.")


def _show(body: dict[str, Any]) -> None:
    repo = body.get("repository", {})
    pairs = [
        (k, repo.get(k)) for k in ("url", "target_branch", "branch_template", "worktree_root", "enabled")
    ]
    pairs += [("keep_days", repo.get("keep_days"))]
    gate = repo.get("gate") or []
    pairs += [("gate", " ".join(gate) if gate else "none"), ("gate_timeout_s", repo.get("gate_timeout_s"))]
    pairs += [
        (k, repo.get(k))
        for k in ("land_batch", "land_mode", "land_failures", "delete_landed", "veto", "forge")
    ]
    if repo.get("forge") == "github":
        pairs += [(k, repo.get(k)) for k in ("github_repository", "github_api_url")]
    pairs += [("revision", repo.get("revision"))]
    reach = body.get("reach")
    if reach is not None:
        said = "answers" if reach.get("reachable") else "does not answer"
        pairs.append(("from Weft", f"{said}{'; ' + reach['problem'] if reach.get('problem') else ''}"))
    fields(f"repository of {body.get('project_id', '')}", pairs)


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    check: Annotated[
        bool, typer.Option("--check", help="Also ask the repository whether it answers.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """The repository settings (404 when none is set)."""
    body = state(ctx).client().get("/api/repository", check=str(check).lower() if check else None)
    if out(ctx, json_out).json:
        emit_json(body)
    else:
        _show(body)


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    url: Annotated[
        str, typer.Argument(help="Path, file://, ssh://, https:// or user@host:path (no credentials).")
    ],
    target: Annotated[str, typer.Option("--target", help="The branch work lands on.")] = "main",
    template: Annotated[
        str | None, typer.Option("--branch-template", help="{task_id}, {work_id}, {short_id}, {capability}.")
    ] = None,
    worktree_root: Annotated[
        str | None, typer.Option("--worktree-root", help="Where worktrees live on agents' hosts.")
    ] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Store it with workstreams off.")] = False,
    keep_days: Annotated[int | None, typer.Option("--keep-days", min=0, max=365)] = None,
    gate: Annotated[
        list[str] | None,
        typer.Option(
            "--gate",
            help="The landing gate, one argument per --gate (never a shell): --gate make --gate test.",
        ),
    ] = None,
    gate_timeout: Annotated[
        int | None, typer.Option("--gate-timeout", min=1, max=86_400, help="Seconds.")
    ] = None,
    batch: Annotated[
        int | None, typer.Option("--batch", min=1, max=64, help="Items landed together.")
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="merge or rebase.")] = None,
    land_failures: Annotated[
        int | None,
        typer.Option("--land-failures", min=1, max=20, help="Failed landings before the operator."),
    ] = None,
    keep_landed: Annotated[
        bool, typer.Option("--keep-landed-branches", help="Keep a landed item's branch and checkpoints.")
    ] = False,
    veto: Annotated[
        bool, typer.Option("--veto", help='Ask the operator "land this?" before each landing.')
    ] = False,
    forge: Annotated[
        str | None, typer.Option("--forge", help="git (landers push) or github (pull requests).")
    ] = None,
    github_repository: Annotated[str | None, typer.Option("--github-repository", help="owner/name.")] = None,
    github_api_url: Annotated[
        str | None, typer.Option("--github-api-url", help="For GitHub Enterprise.")
    ] = None,
    revision: Annotated[
        int | None, typer.Option("--revision", min=0, help="Only if still at this revision (0: none set).")
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Set the repository (admin): each item then works on its own branch and worktree."""
    o = out(ctx, json_out, quiet)
    if mode is not None and mode not in ("merge", "rebase"):
        raise typer.BadParameter("must be merge or rebase", param_hint="--mode")
    if forge is not None and forge not in ("git", "github"):
        raise typer.BadParameter("must be git or github", param_hint="--forge")
    body: dict[str, Any] = {"url": url, "target_branch": target, "enabled": not disabled}
    body["delete_landed"] = not keep_landed
    body["veto"] = veto
    for key, value in (
        ("branch_template", template),
        ("worktree_root", worktree_root),
        ("keep_days", keep_days),
        ("gate", gate),
        ("gate_timeout_s", gate_timeout),
        ("land_batch", batch),
        ("land_mode", mode),
        ("land_failures", land_failures),
        ("forge", forge),
        ("github_repository", github_repository),
        ("github_api_url", github_api_url),
    ):
        if value is not None:
            body[key] = value
    stored = state(ctx).client().put("/api/repository", body, revision=revision)
    if o.json:
        emit_json(stored)
    elif not o.quiet:
        _show(stored)
        reach = stored.get("reach") or {}
        if reach.get("problem"):
            say(f"note: {reach['problem']} (agents' hosts are asked again at each claim)")


@app.command("unset")
def unset_cmd(
    ctx: typer.Context,
    revision: Annotated[int | None, typer.Option("--revision", min=0)] = None,
    quiet: QuietOpt = False,
) -> None:
    """Forget the repository (admin): workstreams off; recorded branches stay."""
    state(ctx).client().delete("/api/repository", revision=revision)
    say("repository unset", quiet=out(ctx, False, quiet).quiet)
