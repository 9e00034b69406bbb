"""Usage and budgets through Warp's tools, over real MCP stdio sessions: usage with progress
and completion, an item stopped by its budget, a daily budget holding claims."""

from __future__ import annotations

from pathlib import Path

import nats
from warp_harness import eventually, spawn_warp

from shared.models import utcnow
from shared.names import ProjectNames
from shared.usage.ledger import UsageLedger
from shared.usage.rules import Budget, Pause, day_of, paused, resumed, with_project_budget

A_ID = "a" * 32
B_ID = "b" * 32
SECRET = "sk-live-Zx81Qa9"


def env_for(base: dict[str, str], agent_id: str, **extra: str) -> dict[str, str]:
    return {
        **base,
        "LOOM_AGENT_ID": agent_id,
        "LOOM_CAPABILITIES": "code",
        "LOOM_AUTO_REGISTER": "1",
        **extra,
    }


async def test_usage_is_reported_and_an_item_over_its_budget_is_stopped(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    async with (
        spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a,
        spawn_warp(env_for(warp_env, B_ID, LOOM_TARGET_ID="box-1"), tmp_path, name="b") as b,
    ):
        made = await a.ready_ok(
            "warp_work_broadcast", {"description": "costly", "capability": "code", "budget": {"cost": 1.0}}
        )
        work_id = made["item"]["id"]
        assert made["item"]["budget"] == {"cost": 1.0, "tokens": None}
        assert (await b.ready_ok("warp_work_claim"))["item"]["id"] == work_id
        usage = {"input_tokens": 1200, "output_tokens": 300, "cost": 0.6, "model": "claude-sonnet-4.5"}
        step = await b.ok("warp_work_progress", {"work_id": work_id, "percent": 40, "usage": usage})
        (row,) = step["item"]["usage"]
        assert (row["agent_id"], row["target_id"], row["model"], row["cost"]) == (
            B_ID,
            "box-1",
            "claude-sonnet-4.5",
            0.6,
        )
        res = await b.call("warp_work_progress", {"work_id": work_id, "percent": 70, "usage": {"cost": 0.5}})
        text = " ".join(c.text for c in res.content if hasattr(c, "text"))
        assert not res.is_error and text.startswith("Stopped: budget exceeded")
        assert "Stop working on it" in text
        assert res.structured_content is not None
        assert res.structured_content["item"]["status"] == "dead-lettered"
        assert (await b.ok("warp_registry_get_info"))["current_tasks"] == 0
        for tool, args in (
            ("warp_work_progress", {"percent": 90}),
            ("warp_work_complete", {"result": "done anyway"}),
        ):
            said = await b.err(tool, {"work_id": work_id, **args})
            assert "was stopped: budget exceeded" in said and "stop working on it" in said
        letters = await a.ok("warp_dlq_list")
        assert [d["item"]["id"] for d in letters["items"]] == [work_id]


async def test_bad_usage_is_refused_naming_the_field_without_echo(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    async with spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a:
        made = await a.ready_ok("warp_work_broadcast", {"description": "x", "capability": "code"})
        await a.ok("warp_work_claim")
        for usage, field in (
            ({"cost": SECRET}, "cost"),
            ({"input_tokens": -5}, "input_tokens"),
            ({"model": SECRET + " !"}, "model"),
        ):
            said = await a.err(
                "warp_work_progress", {"work_id": made["item"]["id"], "percent": 1, "usage": usage}
            )
            assert f"invalid arguments: usage.{field}: must be" in said and SECRET not in said
        bad_budget = await a.err(
            "warp_work_broadcast", {"description": "x", "capability": "code", "budget": {"cost": 0}}
        )
        assert "cost" in bad_budget
        assert (await a.ok("warp_work_complete", {"work_id": made["item"]["id"]}))["item"]["usage"] == []


async def test_a_reached_project_budget_holds_claims_until_raised(
    warp_env: dict[str, str], tmp_path: Path, project_id: str
) -> None:
    nc = await nats.connect(warp_env["NATS_URL"])
    try:
        ledger = UsageLedger(nc.jetstream(), ProjectNames(project_id))
        async with spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a:
            first = await a.ready_ok("warp_work_broadcast", {"description": "one", "capability": "code"})
            await a.ready_ok("warp_work_broadcast", {"description": "two", "capability": "code"})
            await ledger.change_budgets(lambda d: with_project_budget(d, Budget(tokens=100)))
            claimed = (await a.ok("warp_work_claim"))["item"]
            assert claimed["id"] == first["item"]["id"]
            await a.ok("warp_work_complete", {"work_id": claimed["id"], "usage": {"input_tokens": 100}})
            assert (await ledger.day_totals(day_of(utcnow()))).tokens == 100

            told: list[str] = []

            async def refused() -> bool:
                res = await a.call("warp_work_claim")
                told[:] = [" ".join(c.text for c in res.content if hasattr(c, "text"))]
                return bool(res.is_error)

            await eventually(refused, timeout=15)
            said = told[0]
            assert "reached its daily budget" in said and "raises it" in said
            status = await a.ok("warp_work_queue_status")
            assert status["budget_hold"] == said and status["depths"] == {"code": 1}
            await ledger.change_budgets(lambda d: with_project_budget(d, Budget(tokens=1000)))

            async def resumed() -> bool:
                res = await a.call("warp_work_claim")
                return not res.is_error and bool((res.structured_content or {}).get("claimed"))

            await eventually(resumed, timeout=15)
            assert (await a.ok("warp_work_queue_status"))["budget_hold"] is None
    finally:
        await nc.close()


async def test_a_paused_project_is_told_to_its_agents_and_refuses_their_claims(
    warp_env: dict[str, str], tmp_path: Path, project_id: str
) -> None:
    nc = await nats.connect(warp_env["NATS_URL"])
    try:
        ledger = UsageLedger(nc.jetstream(), ProjectNames(project_id))
        async with spawn_warp(
            env_for(warp_env, A_ID, LOOM_MAX_CONCURRENT_TASKS="3"), tmp_path, name="a"
        ) as a:
            await a.ready_ok("warp_work_broadcast", {"description": "one", "capability": "code"})
            await a.ok("warp_work_broadcast", {"description": "two", "capability": "code"})
            held = (await a.ok("warp_work_claim"))["item"]
            await ledger.change_budgets(lambda d: paused(d, Pause(by="ana", reason="freeze", at=utcnow())))

            async def held_back() -> bool:  # the agent reads the pause within its cache's life
                return bool((await a.ok("warp_work_queue_status"))["budget_hold"])

            await eventually(held_back, timeout=15)
            told = await a.err("warp_work_claim")
            assert "paused by ana: freeze" in told and "resumes it" in told
            progress = await a.call("warp_work_progress", {"work_id": held["id"], "percent": 50})
            said = " ".join(c.text for c in progress.content if hasattr(c, "text"))
            assert not progress.is_error and "The project is paused by ana (freeze)" in said
            assert (await a.ok("warp_work_queue_status"))["budget_hold"] in told
            assert (await a.ok("warp_work_complete", {"work_id": held["id"]}))["item"][
                "status"
            ] == "completed"
            await ledger.change_budgets(resumed)

            async def admitted() -> bool:
                res = await a.call("warp_work_claim")
                return not res.is_error and bool((res.structured_content or {}).get("claimed"))

            await eventually(admitted, timeout=15)
    finally:
        await nc.close()


async def test_a_pause_that_stops_running_work_hands_items_back_at_their_next_checkpoint(
    warp_env: dict[str, str], tmp_path: Path, project_id: str
) -> None:
    nc = await nats.connect(warp_env["NATS_URL"])
    try:
        ledger = UsageLedger(nc.jetstream(), ProjectNames(project_id))
        async with spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a:
            await a.ready_ok("warp_work_broadcast", {"description": "one", "capability": "code"})
            held = (await a.ok("warp_work_claim"))["item"]
            stop = Pause(by="ana", reason="incident", at=utcnow(), stop_running=True)
            await ledger.change_budgets(lambda d: paused(d, stop))

            async def held_back() -> bool:  # the agent reads the pause within its cache's life
                return bool((await a.ok("warp_work_queue_status"))["budget_hold"])

            await eventually(held_back, timeout=15)
            progress = await a.call("warp_work_progress", {"work_id": held["id"], "percent": 30})
            said = " ".join(c.text for c in progress.content if hasattr(c, "text"))
            assert not progress.is_error and "handed back to the queue" in said and "(incident)" in said
            item = (progress.structured_content or {})["item"]
            assert (item["status"], item["attempts"], item["assigned_to"]) == ("queued", 0, None)
            gone = await a.err("warp_work_progress", {"work_id": held["id"], "percent": 40})
            assert "not claimed" in gone  # it holds nothing now
            await ledger.change_budgets(resumed)

            async def taken_again() -> bool:
                res = await a.call("warp_work_claim")
                return (
                    not res.is_error
                    and (res.structured_content or {}).get("item", {}).get("id") == held["id"]
                )

            await eventually(taken_again, timeout=15)  # the same item, its first counted attempt
    finally:
        await nc.close()
