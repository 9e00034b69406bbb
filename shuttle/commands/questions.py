"""``shuttle questions`` and ``shuttle answer``: what agents asked the operator, and answers."""

from __future__ import annotations

from typing import Annotated

import typer

from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, out, state
from shuttle.client import seg
from shuttle.errors import UsageError
from shuttle.listing import fetch, more_hint
from shuttle.output import ago, emit_json, escape, say, short, styled, table

STATUSES = ("open", "answered", "expired", "all")


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
        limit: LimitOpt = 50,
        cursor: CursorOpt = None,
        all_pages: AllOpt = False,
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Questions agents asked the operator (open ones by default), newest first."""
        if status not in STATUSES:
            raise UsageError(f"--status: must be one of {', '.join(STATUSES)}")
        o = out(ctx, json_out, quiet)
        params = {"status": None if status == "all" else status, "work_id": work_id}
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
            ["id", "status", "asked by", "work", "choices", "deadline", "asked", "question / answer"],
            [
                (
                    escape(q.get("id", "")),
                    styled(q.get("status")),
                    escape(q.get("asked_by_handle") or short(q.get("asked_by"), 8)),
                    escape(q.get("work_id") or "-"),
                    escape(" | ".join(q.get("choices") or []) or "-"),
                    ago(q.get("deadline")),
                    ago(q.get("created_at")),
                    escape(
                        q.get("question", "")
                        + (f" -> {q['answer']}" if q.get("answer") else "")
                        + (f" ({q['resolution']})" if q.get("status") == "expired" else "")
                    ),
                )
                for q in result["items"]
            ],
            empty="no questions" if status == "all" else f"no {status} questions",
            drop=(5, 6, 4, 3, 2),
        )
        hint = more_hint(result)
        if hint:
            say(hint)

    @app.command("answer")
    def answer_cmd(
        ctx: typer.Context,
        question_id: Annotated[str, typer.Argument(help="Question id.", show_default=False)],
        answer: Annotated[str, typer.Argument(help="The answer (one of its choices, when it has some).")],
        by: Annotated[
            str, typer.Option("--by", help="Who answers, as the agent sees it (a handle).")
        ] = "operator",
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        """Answer a question; the asking agent reads it, and work waiting on it goes on."""
        o = out(ctx, json_out, quiet)
        answered = (
            state(ctx)
            .client()
            .post(f"/api/questions/{seg(question_id)}/answer", {"answer": answer, "by": by})
        )
        if o.json:
            emit_json(answered)
        elif o.quiet:
            typer.echo(answered.get("id", ""))
        else:
            work = f" (work {escape(answered['work_id'])} goes on)" if answered.get("work_id") else ""
            say(f"answered {escape(answered.get('id', ''))}{work}")
