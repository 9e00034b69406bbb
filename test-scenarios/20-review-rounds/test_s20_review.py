"""Scenario 20: a rejected review goes back to the workers with its feedback, and the second
round passes. The author never reviews its own work, a reviewer in another project never
sees the task, and ``shuttle watch`` follows every step."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack

from scenario_harness import Fabric, agents_in, new_project_id, text_of


async def test_a_rejection_goes_back_with_feedback_and_the_second_round_passes(fabric: Fabric) -> None:
    item = await fabric.shuttle_json(
        "submit", "write the tokenizer", "-c", "code", "--review", "review", "--review-rounds", "2"
    )
    work_id = item["id"]
    watch = asyncio.create_task(fabric.shuttle("watch", work_id, "--json", "--timeout", "90"))

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {
                "writer": {"capabilities": ["code", "review"]},
                "fixer": {"capabilities": ["code"]},
                "reviewer": {"capabilities": ["review"]},
                "outsider": {"capabilities": ["review"], "fabric": fabric.project(new_project_id())},
            },
        )
        writer, fixer, reviewer, outsider = (agents[n] for n in ("writer", "fixer", "reviewer", "outsider"))

        first = await writer.claim("code")
        assert first is not None and first["id"] == work_id
        handed = await writer.call("warp_work_complete", work_id=work_id, result={"version": 1})
        assert handed["item"]["status"] == "in-review"
        assert (await fabric.shuttle_json("work", "show", work_id))["status"] == "in-review"
        assert await writer.claim() is None  # its own work: never its review
        assert await outsider.claim() is None  # another project: never its review

        review = await reviewer.raw("warp_work_claim")
        claimed = review.structured_content or {}
        assert claimed["review"] is True and claimed["item"]["assigned_to"] == reviewer.agent_id
        assert '{"version": 1}' in text_of(review)
        rejected = await reviewer.call(
            "warp_work_review",
            work_id=work_id,
            verdict="reject",
            feedback="no tests for empty input",
            score=40,
        )
        assert rejected["item"]["status"] == "queued"

        again = await fixer.raw("warp_work_claim")
        second = (again.structured_content or {})["item"]
        assert second["id"] == work_id and second["attempts"] == 2
        text = text_of(again)
        assert "reject (score 40): no tests for empty input" in text  # the next worker sees the feedback
        assert [(r["result"], r["feedback"]) for r in second["reviews"]] == [
            ({"version": 1}, "no tests for empty input")
        ]
        await fixer.call(
            "warp_work_complete", work_id=work_id, result={"version": 2, "tests": ["empty input"]}
        )
        assert (await reviewer.claim())["id"] == work_id  # type: ignore[index]
        approved = await reviewer.call("warp_work_review", work_id=work_id, verdict="approve", score=95)
        assert approved["item"]["status"] == "completed"

    watched = await asyncio.wait_for(watch, 60)
    assert watched.exit_code == 0, watched.stderr
    steps = [json.loads(line) for line in watched.stdout.splitlines() if line.strip()]
    kinds = [s["type"] for s in steps]
    assert kinds.index("work.rejected") < kinds.index("work.approved")
    assert (
        next(s for s in steps if s["type"] == "work.rejected")["data"]["feedback"]
        == "no tests for empty input"
    )

    final = await fabric.shuttle_json("work", "show", work_id)
    assert final["status"] == "completed" and final["result"] == {"version": 2, "tests": ["empty input"]}
    assert final["assigned_to"] == fixer.agent_id
    assert [(r["round"], r["author"], r["reviewer"], r["verdict"]) for r in final["reviews"]] == [
        (1, writer.agent_id, reviewer.agent_id, "reject"),
        (2, fixer.agent_id, reviewer.agent_id, "approve"),
    ]
    assert (await fabric.shuttle_json("dlq", "list"))["items"] == []
