"""``shuttle questions``, ``shuttle answer`` and ``shuttle defer``: what agents asked the
operator (the most urgent first), answers (one or many in one call) and putting one off
(docs/operator.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from loom import refs
from loom.transport import seg
from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, Out, QuietOpt, command_group, out, state
from shuttle.errors import UsageError
from shuttle.listing import fetch, more_hint
from shuttle.output import ago, emit_json, escape, say, short, styled, table
from shuttle.validate import Invalid, deadline
from shuttle.views import question_fields

STATUSES = ("open", "answered", "expired", "logged", "all")
PRIORITIES = ("P0", "P1", "P2", "P3")
ORDERS = ("urgency", "newest")


def kind(q: dict[str, Any]) -> str:
    """``P0 security sync``; ``(put off)`` while it is deferred."""
    said = " ".join(x for x in (q.get("priority"), q.get("category"), q.get("mode")) if x)
    return said + (f" (put off until {q['deferred_until']})" if q.get("deferred_until") else "")


def answer_text(q: dict[str, Any], width: int) -> str:
    """The answer (``questions show`` prints it whole), or why there is none."""
    if q.get("answer"):
        text = str(q["answer"]) + (" (its default)" if q.get("answered_by") == "policy" else "")
    else:
        text = str(q.get("resolution") or "-") if q.get("status") in ("expired", "logged") else "-"
    return text if len(text) <= width else text[: width - 3] + "..."


questions_app = command_group(
    help="Questions agents asked the operator: list them (open ones by default) or show one whole."
)


@questions_app.callback(invoke_without_command=True)
def questions_cmd(
    ctx: typer.Context,
    status: Annotated[
        str, typer.Option("--status", "-s", help="open (default), answered, expired or all.")
    ] = "open",
    work_id: Annotated[
        str | None,
        typer.Option("--work-id", help="Only questions about this item (id, start of it, task id)."),
    ] = None,
    priority: Annotated[str | None, typer.Option("--priority", "-p", help="Only P0, P1, P2 or P3.")] = None,
    category: Annotated[str | None, typer.Option("--category", help="Only this category.")] = None,
    order: Annotated[
        str, typer.Option("--order", help="urgency (open, then P0-P3, then oldest) or newest.")
    ] = "urgency",
    limit: LimitOpt = 50,
    cursor: CursorOpt = None,
    all_pages: AllOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Questions agents asked the operator (open ones by default), the most urgent first;
    ``shuttle questions show ID`` prints one whole."""
    if ctx.invoked_subcommand is not None:
        return
    if status not in STATUSES:
        raise UsageError(f"--status: must be one of {', '.join(STATUSES)}")
    if priority is not None and priority not in PRIORITIES:
        raise UsageError(f"--priority: must be one of {', '.join(PRIORITIES)}")
    if order not in ORDERS:
        raise UsageError(f"--order: must be one of {', '.join(ORDERS)}")
    o = out(ctx, json_out, quiet)
    client = state(ctx).client()
    params = {
        "status": None if status == "all" else status,
        "work_id": None if work_id is None else refs.work_id(client, work_id),
        "priority": priority,
        "category": category,
        "order": order,
    }
    result = fetch(client, "/api/questions", params, limit=limit, cursor=cursor, follow=all_pages)
    if o.json:
        emit_json(result)
        return
    if o.quiet:
        for q in result["items"]:
            typer.echo(q.get("id", ""))
        return
    table(
        "questions",
        ["id", "status", "priority", "asked by", "work", "choices", "asked", "question", "answer", "by"],
        [
            (
                escape(q.get("id", "")),
                styled(q.get("status")),
                escape(kind(q)),
                escape(q.get("asked_by_handle") or short(q.get("asked_by"), 8)),
                escape(short(q.get("work_id"), 12) if q.get("work_id") else "-"),
                escape(" | ".join(q.get("choices") or []) or "-"),
                ago(q.get("created_at")),
                escape(q.get("question", "")),
                escape(answer_text(q, 40)),
                escape(q.get("answered_by") or "-"),
            )
            for q in result["items"]
        ],
        empty="no questions" if status == "all" else f"no {status} questions",
        flex=7,
        drop=(6, 5, 4, 3, 9),
    )
    hint = more_hint(result)
    if hint:
        say(hint)
    if any(q.get("status") == "open" for q in result["items"]):
        say("shuttle questions show ID: one question whole, with the line that answers it")


@questions_app.command("show")
def show_cmd(
    ctx: typer.Context,
    question_id: Annotated[str, typer.Argument(help="The question's id.", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """One question whole: what was asked and why, its choices, who asked and about which
    work, and its answer (or the line that answers it)."""
    q = state(ctx).client().get(f"/api/questions/{seg(question_id)}")
    if out(ctx, json_out).json:
        emit_json(q)
        return
    question_fields(q)


def register(app: typer.Typer) -> None:
    app.add_typer(questions_app, name="questions")

    @app.command("answer")
    def answer_cmd(
        ctx: typer.Context,
        pairs: Annotated[
            list[str],
            typer.Argument(
                help="A question id and its answer (one of its choices, when it has some); "
                "several pairs answer several questions in one call.",
                show_default=False,
            ),
        ],
        by: Annotated[
            str, typer.Option("--by", help="Who answers, as the agent sees it (a handle).")
        ] = "operator",
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Answer questions; the asking agents read them, and work waiting on them goes on."""
        if len(pairs) % 2:
            raise UsageError("give each question id followed by its answer: ID ANSWER [ID ANSWER ...]")
        o = out(ctx, json_out, quiet)
        client = state(ctx).client()
        if len(pairs) == 2:
            answered = client.post(f"/api/questions/{seg(pairs[0])}/answer", {"answer": pairs[1], "by": by})
            if o.json:
                emit_json(answered)
            elif o.quiet:
                typer.echo(answered.get("id", ""))
            else:
                work = f" (work {escape(answered['work_id'])} goes on)" if answered.get("work_id") else ""
                say(f"answered {escape(answered.get('id', ''))}{work}")
            return
        entries = [{"question_id": pairs[i], "answer": pairs[i + 1]} for i in range(0, len(pairs), 2)]
        _batch(o, client.post("/api/questions/answers", {"answers": entries, "by": by}))

    @app.command("defer")
    def defer_cmd(
        ctx: typer.Context,
        question_ids: Annotated[list[str], typer.Argument(help="Question ids.", show_default=False)],
        until: Annotated[
            str, typer.Option("--until", help="ISO time with timezone, or a duration: 30m, 2h, 1d.")
        ],
        by: Annotated[str, typer.Option("--by", help="Who puts it off (a handle).")] = "operator",
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Put questions off until a time: they stay open (work waiting on them keeps
        waiting) and are listed after the others until then."""
        try:
            when = deadline(until, field="--until")
        except Invalid as exc:
            raise UsageError(str(exc)) from None
        o = out(ctx, json_out, quiet)
        client = state(ctx).client()
        if len(question_ids) == 1:
            done = client.post(f"/api/questions/{seg(question_ids[0])}/defer", {"until": when, "by": by})
            if o.json:
                emit_json(done)
            elif o.quiet:
                typer.echo(done.get("id", ""))
            else:
                say(f"put off {escape(done.get('id', ''))} until {escape(done.get('deferred_until', ''))}")
            return
        entries = [{"question_id": q, "defer_until": when} for q in question_ids]
        _batch(o, client.post("/api/questions/answers", {"answers": entries, "by": by}))


def _batch(o: Out, body: dict[str, Any]) -> None:
    """One line per entry of a batch; exits 1 when any was refused."""
    if o.json:
        emit_json(body)
    else:
        for r in body.get("results", []):
            problem = r.get("error")
            if problem is not None:
                say(f"refused {escape(r.get('question_id', ''))}: {escape(problem.get('message', ''))}")
            elif not o.quiet:
                q = r.get("question") or {}
                done = "put off" if q.get("status") == "open" else "answered"
                say(f"{done} {escape(q.get('id', ''))}")
        if not o.quiet:
            counts = (body.get(k, 0) for k in ("answered", "deferred", "refused"))
            say("{} answered, {} put off, {} refused".format(*counts))
    if body.get("refused"):
        raise typer.Exit(1)
