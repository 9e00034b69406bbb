"""Questions for the operator through real Warp processes: the claim of work waiting on the
operator does not lapse (a short ack deadline, another agent pulling), the answer reaches
the agent also after its Warp restarted, a deadline resolves with no answer, and the
autonomy policy's modes as the agent sees them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from nats.aio.client import Client as NatsClient
from warp_harness import eventually, spawn_warp

from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from testsupport.work import work_queue

A_ID = "a" * 32
B_ID = "b" * 32

FAST = {"LOOM_WORK_ACK_WAIT_S": "1", "LOOM_CAPABILITIES": "code", "LOOM_AUTO_REGISTER": "1"}


async def test_waiting_on_the_operator_keeps_the_claim_and_the_answer_survives_a_restart(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    names = ProjectNames(warp_env["LOOM_PROJECT_ID"])
    queue = work_queue(nc, names)
    book = QuestionBook(nc, names, queue)
    env_a = {**warp_env, **FAST, "LOOM_AGENT_ID": A_ID}
    async with spawn_warp({**warp_env, **FAST, "LOOM_AGENT_ID": B_ID}, tmp_path, name="b") as b:
        async with spawn_warp(env_a, tmp_path, name="a") as a:
            item = (
                await a.ready_ok("warp_work_broadcast", {"description": "migrate", "capability": "code"})
            )["item"]
            assert (await a.ok("warp_work_claim"))["item"]["id"] == item["id"]
            asked = await a.call(
                "warp_question_ask",
                {"question": "postgres or sqlite?", "choices": ["postgres", "sqlite"], "work_id": item["id"]},
            )
            assert not asked.is_error, asked.content
            question = asked.structured_content["question"]  # type: ignore[index]
            assert (await queue.get(item["id"])).status.value == "waiting-on-operator"
            # Three ack deadlines pass while B keeps trying to claim: A's Warp keeps the claim alive.
            for _ in range(12):
                assert (await b.ok("warp_work_claim"))["claimed"] is False
                await asyncio.sleep(0.25)
            waiting = await queue.get(item["id"])
            assert (waiting.status.value, waiting.assigned_to, waiting.attempts) == (
                "waiting-on-operator",
                A_ID,
                1,
            )
            assert (await a.ok("warp_registry_get_info"))["current_tasks"] == 1
            open_now = await a.ok("warp_question_get", {"question_id": question["id"]})
            assert open_now["question"]["status"] == "open"
            a.kill9()
            await a.wait_exit()

        await book.answer(question["id"], "sqlite", by="alice")  # while A's Warp is down
        async with spawn_warp(env_a, tmp_path, name="a2") as again:
            mine = await again.ready_ok("warp_question_list", {"status": "answered"})
            assert [(q["id"], q["answer"]) for q in mine["items"]] == [(question["id"], "sqlite")]
            read = await again.call("warp_question_get", {"question_id": question["id"]})
            assert "ANSWER (answered by alice): sqlite" in read.content[0].text  # type: ignore[union-attr]
            assert (await queue.get(item["id"])).status.value == "in-progress"
            assert (await again.ok("warp_registry_get_info"))["current_tasks"] == 1  # recovered
            done = await again.ok("warp_work_complete", {"work_id": item["id"], "result": {"db": "sqlite"}})
            assert done["item"]["status"] == "completed" and done["item"]["attempts"] == 1


async def test_a_question_past_its_deadline_resolves_with_no_answer(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    async with spawn_warp({**warp_env, **FAST, "LOOM_AGENT_ID": A_ID}, tmp_path, name="a") as a:
        item = (await a.ready_ok("warp_work_broadcast", {"description": "deploy", "capability": "code"}))[
            "item"
        ]
        await a.ok("warp_work_claim")
        asked = await a.ok(
            "warp_question_ask", {"question": "deploy on friday?", "work_id": item["id"], "expires_in_s": 1}
        )
        question_id = asked["question"]["id"]

        async def resolved() -> bool:
            out = await a.ok("warp_question_get", {"question_id": question_id, "wait_s": 2})
            return bool(out["question"]["status"] == "expired")

        await eventually(resolved, timeout=15)
        read = await a.call("warp_question_get", {"question_id": question_id})
        assert "NO ANSWER: no answer before the deadline" in read.content[0].text  # type: ignore[union-attr]
        listed = await a.ok("warp_work_list", {"mine": True})
        assert listed["items"][0]["status"] == "in-progress"
        for bad, field in (
            ({"question": "x", "deadline": "2020-01-01T00:00:00Z"}, "deadline: must be in the future"),
            ({"question": "x", "expires_in_s": 5, "deadline": "2099-01-01T00:00:00Z"}, "expires_in_s"),
            ({"question": "x", "choices": ["a", "a"]}, "must not repeat a choice"),
            ({"question": "x", "work_id": "f" * 32}, "work_id: no work item with this id in this project"),
            ({"question": ""}, "question"),
            ({"question": "x", "priority": "P9"}, "priority"),
            ({"question": "x", "category": "Bad Category!"}, "category"),
            ({"question": "x", "choices": ["a", "b"], "default_answer": "c"}, "default_answer"),
        ):
            text = await a.err("warp_question_ask", bad)
            assert field in text and "Bad Category!" not in text, (bad, text)
        # The project's default autonomy policy: P1 goes on (async), P3 is only logged.
        noted = await a.call(
            "warp_question_ask",
            {"question": "tabs?", "work_id": item["id"], "priority": "P1", "category": "style"},
        )
        said = noted.content[0].text  # type: ignore[union-attr]
        assert "(P1 style, async)" in said and "go on and read the answer later" in said, said
        assert (await a.ok("warp_work_list", {"mine": True}))["items"][0]["status"] == "in-progress"
        logged = await a.ok(
            "warp_question_ask", {"question": "rename?", "priority": "P3", "default_answer": "yes"}
        )
        assert (logged["question"]["status"], logged["question"]["answer"]) == ("logged", "yes")
        assert "question_id" in await a.err("warp_question_get", {"question_id": "nothex"})
        assert "no question with this id" in await a.err("warp_question_get", {"question_id": "0" * 32})
