"""``shuttle submit``: offer work to the fleet (flags, a JSON/YAML batch file,
or interactive prompts), optionally following it to the end with ``--wait``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from loom.transport import WeftClient, seg
from shared.limits import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    MAX_ATTEMPTS_LIMIT,
    MAX_REVIEW_ROUNDS,
    PRIORITY_MAX,
    PRIORITY_MIN,
)
from shuttle import validate as v
from shuttle.app import JsonOpt, Out, QuietOpt, out, state
from shuttle.errors import ClientError, OutcomeFailed, ShuttleError, UsageError
from shuttle.output import emit_json, escape, say, styled


def _prompt(label: str, check: Any, default: Any = None, *, field: str | None = None) -> Any:
    """Ask until the answer passes ``check``. Empty keeps the default; for a required
    ``field`` (no default) empty asks again."""
    while True:
        raw = typer.prompt(
            label, default="" if default is None else str(default), show_default=default is not None, err=True
        )
        if raw == "" and default is None:
            if field is None:
                return None
            typer.echo(f"  {field}: is required", err=True)
            continue
        try:
            return check(raw)
        except v.Invalid as exc:
            typer.echo(f"  {exc}", err=True)


def _interactive() -> dict[str, Any]:
    raw: dict[str, Any] = {
        "description": _prompt("Description", v.description, field="description"),
        "capability": _prompt("Capability", lambda x: v.token(x, "capability"), field="capability"),
        "boundary": _prompt("Boundary", lambda x: v.token(x, "boundary"), "default"),
        "priority": _prompt(
            f"Priority ({PRIORITY_MIN}-{PRIORITY_MAX})",
            lambda x: v.priority(_int(x, "priority")),
            DEFAULT_PRIORITY,
        ),
        "required_agent_type": _prompt(
            "Required agent type (empty: any)", lambda x: v.token(x, "required_agent_type")
        ),
        "deadline": _prompt("Deadline (ISO time or 30m/2h/1d; empty: none)", v.deadline),
        "context": _prompt("Context JSON object (empty: none)", v.context),
        "task_id": _prompt("Task id", v.task_id, v.new_task_id()),
    }
    return v.submission({k: val for k, val in raw.items() if val is not None})


def _int(text: str, field: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise v.Invalid(f"{field}: must be a whole number") from None


def _submit_all(client: WeftClient, batch: list[dict[str, Any]], o: Out) -> list[dict[str, Any]]:
    done: list[dict[str, Any]] = []
    for n, submission in enumerate(batch, 1):
        try:
            item = client.post("/api/work", submission)
        except (ShuttleError, ClientError) as exc:
            if done:
                exc.message = (
                    f"item {n} ({submission['task_id']}): {exc.message} "
                    f"[{len(done)} submitted before it: {', '.join(i.get('id', '') for i in done)}]"
                )
            raise
        done.append(item)
        if not o.json:
            if o.quiet:
                typer.echo(item.get("id", ""))
            else:
                say(
                    f"submitted {escape(item.get('id', ''))} ({escape(item.get('task_id', ''))}) "
                    f"{styled(item.get('status'))}"
                )
    return done


def _submit_plan(
    client: WeftClient, batch: list[dict[str, Any]], o: Out, where: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A plan goes to Weft in one request; it creates all of it or nothing."""
    try:
        answer = client.post("/api/work/plan", {"items": batch})
    except (ShuttleError, ClientError) as exc:
        exc.message = f"--file {where}: {exc.message} (nothing was submitted)"
        raise
    items: list[dict[str, Any]] = answer.get("items", []) if isinstance(answer, dict) else []
    names: dict[str, str] = (answer.get("names") or {}) if isinstance(answer, dict) else {}
    named = {work_id: name for name, work_id in names.items()}
    if not o.json:
        for item in items:
            if o.quiet:
                typer.echo(item.get("id", ""))
                continue
            name = named.get(item.get("id", ""))
            label = f" {escape(name)}" if name else ""
            say(
                f"submitted {escape(item.get('id', ''))}{label} ({escape(item.get('task_id', ''))}) "
                f"{styled(item.get('status'))}"
            )
    return items, names


def register(app: typer.Typer) -> None:
    @app.command("submit")
    def submit(
        ctx: typer.Context,
        description: Annotated[
            str | None, typer.Argument(help="What to do (the agent reads this).", show_default=False)
        ] = None,
        capability: Annotated[
            str | None, typer.Option("--capability", "-c", help="Capability an agent needs (one token).")
        ] = None,
        boundary: Annotated[
            str, typer.Option("--boundary", "-b", help="Boundary (policy zone).")
        ] = "default",
        priority: Annotated[
            int,
            typer.Option(
                "--priority", "-P", min=PRIORITY_MIN, max=PRIORITY_MAX, help=f"{PRIORITY_MAX} runs first."
            ),
        ] = DEFAULT_PRIORITY,
        task_id: Annotated[
            str | None, typer.Option("--task-id", help="Your own id for the task [default: generated].")
        ] = None,
        required_type: Annotated[
            str | None, typer.Option("--required-type", help="Only this agent type may take it.")
        ] = None,
        preferred_type: Annotated[
            str | None, typer.Option("--preferred-type", help="Prefer this type.")
        ] = None,
        deadline: Annotated[
            str | None, typer.Option("--deadline", help="ISO time with timezone, or 30m / 2h / 1d from now.")
        ] = None,
        context: Annotated[
            str | None, typer.Option("--context", help="JSON object, or @file.json.", show_default=False)
        ] = None,
        scope: Annotated[str, typer.Option("--scope", help="private, personal, team or public.")] = "team",
        max_attempts: Annotated[
            int, typer.Option("--max-attempts", min=1, max=MAX_ATTEMPTS_LIMIT)
        ] = DEFAULT_MAX_ATTEMPTS,
        review: Annotated[
            str | None,
            typer.Option(
                "--review", help="Have an agent with this capability review the result (not its author)."
            ),
        ] = None,
        review_rounds: Annotated[
            int | None,
            typer.Option(
                "--review-rounds",
                min=1,
                max=MAX_REVIEW_ROUNDS,
                help="With --review: rejections before it fails [1].",
            ),
        ] = None,
        after: Annotated[
            list[str] | None,
            typer.Option("--after", help="Run only after this work item completed (repeat for several)."),
        ] = None,
        veto: Annotated[
            bool | None,
            typer.Option(
                "--veto/--no-veto",
                help='Ask the operator "land this?" before its code lands [default: as the repository says].',
                show_default=False,
            ),
        ] = None,
        file: Annotated[
            str | None,
            typer.Option("--file", "-f", help="JSON/YAML file with one item or a list ('-' for stdin)."),
        ] = None,
        interactive: Annotated[
            bool, typer.Option("--interactive", "-i", help="Ask for each field, validating as you go.")
        ] = False,
        wait: Annotated[
            bool, typer.Option("--wait", "-w", help="Follow until done; exit 0 only if completed.")
        ] = False,
        wait_timeout: Annotated[
            float | None,
            typer.Option("--wait-timeout", min=0.1, help="With --wait: give up after N seconds."),
        ] = None,
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Submit work: from flags, from a batch file (--file) or interactively (-i)."""
        o = out(ctx, json_out, quiet)
        modes = sum([file is not None, interactive, description is not None])
        if modes > 1:
            raise UsageError("give a DESCRIPTION, --file or --interactive, not several")
        if (after or review or veto is not None) and file is not None:
            raise UsageError(
                "--after, --review and --veto are for one submission; in a file, give each item its "
                "depends_on, after, review or veto"
            )
        depends_on = _after(after)
        reviewed = _review(review, review_rounds)
        if file is not None:
            batch = v.load_batch(file)
        elif interactive:
            batch = [_interactive()]
            if depends_on:
                batch[0]["depends_on"] = depends_on
            if reviewed:
                batch[0]["review"] = reviewed
            if veto is not None:
                batch[0]["veto"] = veto
        else:
            if description is None:
                raise UsageError("DESCRIPTION is required (or use --file / --interactive)")
            if capability is None:
                raise UsageError("--capability is required")
            raw: dict[str, Any] = {
                "task_id": task_id,
                "description": description,
                "capability": capability,
                "boundary": boundary,
                "priority": priority,
                "required_agent_type": required_type,
                "preferred_agent_type": preferred_type,
                "deadline": deadline,
                "context": context,
                "scope": scope,
                "max_attempts": max_attempts,
                "depends_on": depends_on,
                "review": reviewed,
                "veto": veto,
            }
            batch = [v.submission(raw)]
        client = state(ctx).client()
        single = file is None
        names: dict[str, str] | None = None
        if file is not None and v.is_plan(batch):
            items, names = _submit_plan(client, batch, o, file)
        else:
            items = _submit_all(client, batch, o)
        if wait:
            items = _wait_all(client, items, o, wait_timeout, single=single, names=names)
        if o.json:
            _emit(items, single, names)


def _emit(items: list[dict[str, Any]], single: bool, names: dict[str, str] | None = None) -> None:
    """One submission prints the item; a batch file prints ``{"items": [...]}`` (a plan
    also ``"names"``: each local name and the id its item got)."""
    if single:
        emit_json(items[0])
    else:
        emit_json({"items": items} if names is None else {"items": items, "names": names})


def _review(capability: str | None, rounds: int | None) -> dict[str, Any] | None:
    if capability is None:
        if rounds is not None:
            raise UsageError("--review-rounds needs --review CAPABILITY")
        return None
    return {"capability": capability, "rounds": rounds or 1}


def _after(ids: list[str] | None) -> list[str] | None:
    if not ids:
        return None
    try:
        return v.work_ids(ids, "--after")
    except v.Invalid as exc:
        raise UsageError(str(exc)) from None


def _wait_all(
    client: WeftClient,
    items: list[dict[str, Any]],
    o: Out,
    timeout: float | None,
    *,
    single: bool,
    names: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Follow each item in turn; fail (exit 1) if any did not complete."""
    from shuttle.follow import follow

    quiet_follow = Out(json=False, quiet=o.quiet or o.json)
    finals: list[dict[str, Any]] = []
    failures: list[str] = []
    for item in items:
        try:
            finals.append(follow(client, item["id"], quiet_follow, timeout=timeout))
        except OutcomeFailed as exc:
            failures.append(exc.message)
            finals.append(client.get(f"/api/work/{seg(item['id'])}"))
    if failures:
        if o.json:
            _emit(finals, single, names)
        raise OutcomeFailed("; ".join(failures))
    return finals
