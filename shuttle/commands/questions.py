"""``shuttle questions``, ``shuttle answer`` and ``shuttle defer``: what agents asked the
operator (the most urgent first), answers (one or many in one call) and putting one off
(docs/operator.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from loom.transport import seg
from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, Out, QuietOpt, out, state
from shuttle.errors import UsageError
from shuttle.listing import fetch, more_hint
from shuttle.output import ago, emit_json, escape, say, short, styled, table
from shuttle.validate import Invalid, deadline

STATUSES = ("open", "answered", "expired", "logged", "all")
PRIORITIES = ("P0", "P1", "P2", "P3")
ORDERS = ("urgency", "newest")


def kind(q: dict[str, Any]) -> str:
    """``P0 security sync``; ``(put off)`` while it is deferred."""
    said = " ".join(x for x in (q.get("priority"), q.get("category"), q.get("mode")) if x)
    return said + (f" (put off until {q['deferred_until']})" if q.get("deferred_until") else "")


def told(q: dict[str, Any]) -> str:
    if q.get("answer") and q.get("answered_by") == "policy":
        return f" -> {q['answer']} (its default)"
    if q.get("answer"):
        return f" -> {q['answer']}"
    return f" ({q['resolution']})" if q.get("status") in ("expired", "logged") else ""


def register(app: typer.Typer) -> None:
    @app.command("questions")
    def questions_cmd(
        ctx: typer.Context,
        status: Annotated[
            str, typer.Option("--status", "-s", help="open (default), answered, expired or all.")
        ] = "open",
        work_id: Annotated[
            str | None, typer.Option("--work-id", help="Only questions about this item.")
        ] = None,
        priority: Annotated[
            str | None, typer.Option("--priority", "-p", help="Only P0, P1, P2 or P3.")
        ] = None,
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
        """Questions agents asked the operator (open ones by default), the most urgent first."""
        if status not in STATUSES:
            raise UsageError(f"--status: must be one of {', '.join(STATUSES)}")
        if priority is not None and priority not in PRIORITIES:
            raise UsageError(f"--priority: must be one of {', '.join(PRIORITIES)}")
        if order not in ORDERS:
            raise UsageError(f"--order: must be one of {', '.join(ORDERS)}")
        o = out(ctx, json_out, quiet)
        params = {
            "status": None if status == "all" else status,
            "work_id": work_id,
            "priority": priority,
            "category": category,
            "order": order,
        }
        result = fetch(
            state(ctx).client(), "/api/questions", params, limit=limit, cursor=cursor, follow=all_pages
        )
        if o.json:
            emit_json(result)
            return
        if o.quiet:
            for q in result["items"]:
                typer.echo(q.get("id", ""))
            return
        table(
            "questions",
            [
                "id",
                "status",
                "priority",
                "asked by",
                "work",
                "choices",
                "deadline",
                "asked",
                "question / answer",
            ],
            [
                (
                    escape(q.get("id", "")),
                    styled(q.get("status")),
                    escape(kind(q)),
                    escape(q.get("asked_by_handle") or short(q.get("asked_by"), 8)),
                    escape(q.get("work_id") or "-"),
                    escape(" | ".join(q.get("choices") or []) or "-"),
                    ago(q.get("deadline")),
                    ago(q.get("created_at")),
                    escape(q.get("question", "") + told(q)),
                )
                for q in result["items"]
            ],
            empty="no questions" if status == "all" else f"no {status} questions",
            drop=(6, 7, 5, 4, 3),
        )
        hint = more_hint(result)
        if hint:
            say(hint)

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
