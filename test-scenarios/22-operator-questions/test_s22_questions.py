"""Scenario 22: an agent asks the operator a question about the work it holds; the work waits
(its claim kept past several ack deadlines); the operator answers with ``shuttle answer``; the
agent reads the answer and finishes with it in its result. Another project sees nothing."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from scenario_harness import Fabric, agents_in, new_project_id

FAST = {"LOOM_WORK_ACK_WAIT_S": "1"}


async def test_an_agents_question_is_answered_with_shuttle_and_the_work_finishes_with_it(
    fabric: Fabric,
) -> None:
    item = await fabric.shuttle_json("submit", "set up the cache", "-c", "code")
    work_id = item["id"]
    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {
                "builder": {"capabilities": ["code"], "extra_env": FAST},
                "other": {"capabilities": ["code"], "extra_env": FAST},
            },
        )
        builder, other = agents["builder"], agents["other"]
        claimed = await builder.claim()
        assert claimed is not None and claimed["id"] == work_id
        asked = await builder.call(
            "warp_question_ask",
            question="Which cache backend should I use?",
            choices=["redis", "memcached"],
            work_id=work_id,
            expires_in_s=600,
        )
        question_id = asked["question"]["id"]
        assert (await fabric.shuttle_json("work", "show", work_id))["status"] == "waiting-on-operator"

        listed = await fabric.shuttle("questions")
        assert listed.exit_code == 0 and question_id in listed.stdout and "redis | memcached" in listed.stdout
        # Another project sees no question and cannot answer this one.
        outside = fabric.project(new_project_id())
        assert (await outside.shuttle_json("questions"))["items"] == []
        foreign = await outside.shuttle("answer", question_id, "redis")
        assert foreign.exit_code == 1 and "no question with this id in this project" in foreign.stderr

        # The person takes their time: three ack deadlines pass, another agent keeps asking
        # for work, and the claim stays with the builder.
        for _ in range(12):
            assert await other.claim() is None
            await asyncio.sleep(0.25)
        waiting = await fabric.shuttle_json("work", "show", work_id)
        assert (waiting["status"], waiting["assigned_to"], waiting["attempts"]) == (
            "waiting-on-operator",
            builder.agent_id,
            1,
        )

        reading = asyncio.create_task(builder.call("warp_question_get", question_id=question_id, wait_s=20))
        wrong = await fabric.shuttle("answer", question_id, "postgres")
        assert (
            wrong.exit_code == 1
            and "must be one of the question's choices (redis, memcached)" in wrong.stderr
        )
        said = await fabric.shuttle("answer", question_id, "redis", "--by", "alice")
        assert said.exit_code == 0 and f"(work {work_id} goes on)" in said.stdout
        read = (await asyncio.wait_for(reading, 30))["question"]
        assert (read["status"], read["answer"], read["answered_by"]) == ("answered", "redis", "alice")
        assert (await fabric.shuttle_json("work", "show", work_id))["status"] == "in-progress"

        done = await builder.call(
            "warp_work_complete", work_id=work_id, result={"cache": read["answer"], "question": question_id}
        )
        assert done["item"]["status"] == "completed"
    final = await fabric.shuttle_json("work", "show", work_id)
    assert final["result"] == {"cache": "redis", "question": question_id} and final["attempts"] == 1
    assert (await fabric.shuttle_json("questions"))["items"] == []  # nothing open any more
    answered = await fabric.shuttle_json("questions", "--status", "answered")
    assert [q["id"] for q in answered["items"]] == [question_id]
