"""Work and dead letters across Warp processes, over real MCP stdio sessions."""

from __future__ import annotations

from pathlib import Path

from nats.aio.client import Client as NatsClient
from warp_harness import eventually, spawn_warp

from shared.names import ProjectNames
from testsupport.work import work_queue

A_ID = "a" * 32
B_ID = "b" * 32
C_ID = "c" * 32
D_ID = "d" * 32


def env_for(base: dict[str, str], agent_id: str, **extra: str) -> dict[str, str]:
    return {
        **base,
        "LOOM_AGENT_ID": agent_id,
        "LOOM_CAPABILITIES": "code",
        "LOOM_AUTO_REGISTER": "1",
        **extra,
    }


async def test_priorities_failures_dead_letters_and_retry(warp_env: dict[str, str], tmp_path: Path) -> None:
    async with (
        spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a,
        spawn_warp(env_for(warp_env, B_ID, LOOM_MAX_CONCURRENT_TASKS="3"), tmp_path, name="b") as b,
    ):
        ids = {}
        for prio in (2, 9, 5):
            out = await a.ready_ok(
                "warp_work_broadcast", {"description": f"p{prio}", "capability": "code", "priority": prio}
            )
            ids[prio] = out["item"]["id"]
        order = [(await b.ready_ok("warp_work_claim"))["item"]["priority"] for _ in range(3)]
        assert order == [9, 5, 2]
        me = await b.ok("warp_registry_get_info")
        assert (me["current_tasks"], me["status"]) == (3, "busy")
        refused = await b.err("warp_work_claim")
        # it names what the agent holds: one whose claim answer was lost can go on with it
        assert "max_concurrent_tasks" in refused and all(work_id in refused for work_id in ids.values())
        top = ids[9]
        for attempt in (1, 2, 3):
            if attempt > 1:
                again = await b.ok("warp_work_claim")
                assert again["item"]["id"] == top and again["item"]["attempts"] == attempt
            failed = await b.ok("warp_work_fail", {"work_id": top, "error": f"boom {attempt}"})
        assert failed["item"]["status"] == "dead-lettered"
        for prio in (5, 2):
            await b.ok("warp_work_complete", {"work_id": ids[prio], "result": "done"})
        assert (await b.ok("warp_registry_get_info"))["current_tasks"] == 0
        letters = await a.ok("warp_dlq_list", {"capability": "code"})
        assert [d["item"]["id"] for d in letters["items"]] == [top]
        assert [e["error"] for e in letters["items"][0]["item"]["errors"]] == ["boom 1", "boom 2", "boom 3"]
        assert (await a.ok("warp_work_queue_status"))["dead_letters"] == 1
        retried = await a.ok("warp_dlq_retry", {"work_id": top})
        assert (retried["item"]["status"], retried["item"]["attempts"]) == ("queued", 0)
        back = await b.ok("warp_work_claim")
        assert back["item"]["id"] == top and back["item"]["attempts"] == 1
        assert (await a.ok("warp_dlq_list"))["items"] == []


async def test_claim_of_a_killed_agent_is_redelivered(warp_env: dict[str, str], tmp_path: Path) -> None:
    fast = {"LOOM_WORK_ACK_WAIT_S": "1.5"}
    async with spawn_warp(env_for(warp_env, C_ID, **fast), tmp_path, name="c") as c:
        item = (await c.ready_ok("warp_work_broadcast", {"description": "fragile", "capability": "code"}))[
            "item"
        ]
        assert (await c.ok("warp_work_claim"))["item"]["id"] == item["id"]
        c.kill9()
        await c.wait_exit()
    async with spawn_warp(env_for(warp_env, D_ID, **fast), tmp_path, name="d") as d:
        claimed: dict[str, object] = {}

        async def got_it() -> bool:
            out = await d.ready_ok("warp_work_claim")
            claimed.update(out)
            return bool(out["claimed"])

        await eventually(got_it, timeout=30)
        redelivered = claimed["item"]
        assert isinstance(redelivered, dict)
        assert redelivered["id"] == item["id"] and redelivered["attempts"] == 2
        assert redelivered["assigned_to"] == D_ID
        assert "claim expired" in redelivered["errors"][0]["error"]
        done = await d.ok("warp_work_complete", {"work_id": item["id"]})
        assert done["item"]["status"] == "completed"


async def test_cancelled_work_is_reported_on_the_next_call(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    async with spawn_warp(env_for(warp_env, B_ID), tmp_path, name="b") as b:
        item = (await b.ready_ok("warp_work_broadcast", {"description": "maybe", "capability": "code"}))[
            "item"
        ]
        assert (await b.ok("warp_work_claim"))["item"]["id"] == item["id"]
        queue = work_queue(nc, ProjectNames(warp_env["LOOM_PROJECT_ID"]))
        await queue.cancel(item["id"], reason="no longer needed", by="operator")

        async def told() -> bool:
            res = await b.call("warp_work_progress", {"work_id": item["id"], "percent": 50})
            text = res.content[0].text if res.content else ""  # type: ignore[union-attr]
            return bool(res.is_error) and "was cancelled by operator: no longer needed" in text

        await eventually(told)
        assert (await b.ok("warp_registry_get_info"))["current_tasks"] == 0
        text = await b.err("warp_work_complete", {"work_id": item["id"]})
        assert "stop working on it" in text


async def test_broadcast_with_depends_on_waits_blocked_until_the_dependency_completes(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    async with (
        spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a,
        spawn_warp(env_for(warp_env, B_ID), tmp_path, name="b") as b,
    ):
        first = (await a.ready_ok("warp_work_broadcast", {"description": "schema", "capability": "code"}))[
            "item"
        ]
        out = await a.call(
            "warp_work_broadcast", {"description": "api", "capability": "code", "depends_on": [first["id"]]}
        )
        assert not out.is_error
        then = out.structured_content["item"]  # type: ignore[index]
        text = out.content[0].text  # type: ignore[union-attr]
        assert then["status"] == "blocked" and then["blocked_on"] == [first["id"]]
        assert text.startswith("Blocked until its dependencies complete.") and first["id"] in text
        assert (await b.ready_ok("warp_work_claim"))["item"]["id"] == first["id"]
        assert (await b.ok("warp_work_complete", {"work_id": first["id"]}))["item"]["dependents"] == [
            then["id"]
        ]
        assert (await b.ok("warp_work_claim"))["item"]["id"] == then["id"]
        for bad, rule in (
            (["0" * 31], "depends_on.0"),
            (["f" * 32], "depends_on.0: no work item with this id in this project"),
            ([first["id"], first["id"]], "depends_on: must not name the same item twice"),
        ):
            error = await a.err(
                "warp_work_broadcast", {"description": "x", "capability": "code", "depends_on": bad}
            )
            assert rule in error and "0" * 31 not in error and "f" * 32 not in error


async def test_a_review_is_claimed_by_another_agent_and_its_verdict_given_through_warp(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    both = {"LOOM_CAPABILITIES": "code,review"}
    async with (
        spawn_warp(env_for(warp_env, A_ID, **both), tmp_path, name="a") as a,
        spawn_warp(env_for(warp_env, B_ID, **both), tmp_path, name="b") as b,
    ):
        review = {"capability": "review", "rounds": 2}
        item = (
            await a.ready_ok(
                "warp_work_broadcast", {"description": "parser", "capability": "code", "review": review}
            )
        )["item"]
        assert (await a.ok("warp_work_claim", {"capability": "code"}))["item"]["id"] == item["id"]
        handed = await a.call("warp_work_complete", {"work_id": item["id"], "result": {"pr": 1}})
        assert handed.structured_content["item"]["status"] == "in-review"  # type: ignore[index]
        assert handed.content[0].text.startswith("Handed in for review")  # type: ignore[union-attr]
        assert (await a.ok("warp_registry_get_info"))["current_tasks"] == 0
        assert (await a.ok("warp_work_claim"))["claimed"] is False  # never its own review

        claimed = await b.call("warp_work_claim", {})
        out = claimed.structured_content
        assert out is not None and out["review"] is True and out["item"]["status"] == "reviewing"
        assert "warp_work_review" in claimed.content[0].text  # type: ignore[union-attr]
        assert "reject with feedback" in claimed.content[0].text  # type: ignore[union-attr]
        assert "feedback: must say what to change" in await b.err(
            "warp_work_review", {"work_id": item["id"], "verdict": "reject"}
        )
        assert "claimed by another agent" in await a.err(
            "warp_work_review", {"work_id": item["id"], "verdict": "approve"}
        )
        assert "score" in await b.err(
            "warp_work_review", {"work_id": item["id"], "verdict": "approve", "score": 101}
        )
        rejected = await b.ok(
            "warp_work_review",
            {"work_id": item["id"], "verdict": "reject", "feedback": "add tests", "score": 3},
        )
        assert rejected["item"]["status"] == "queued"
        assert (await b.ok("warp_registry_get_info"))["current_tasks"] == 0

        again = await b.call("warp_work_claim", {"capability": "code"})
        text = again.content[0].text  # type: ignore[union-attr]
        assert "round 1 by" in text and "reject (score 3): add tests" in text
        await b.ok("warp_work_complete", {"work_id": item["id"], "result": {"pr": 2}})
        assert (await a.ok("warp_work_claim", {"capability": "review"}))["review"] is True
        done = await a.ok("warp_work_review", {"work_id": item["id"], "verdict": "approve"})
        assert done["item"]["status"] == "completed" and done["item"]["assigned_to"] == B_ID
        assert [r["verdict"] for r in done["item"]["reviews"]] == ["reject", "approve"]


async def test_an_agent_completes_with_artifacts_and_a_bad_one_is_refused_by_its_field(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    """Artifacts through a real Warp over MCP: kept on the item as handed back; a part
    that breaks a rule is a tool error naming its place and rule, not the value, and the
    item stays the agent's."""
    async with spawn_warp(env_for(warp_env, A_ID), tmp_path, name="a") as a:
        item = (await a.ready_ok("warp_work_broadcast", {"description": "build it", "capability": "code"}))[
            "item"
        ]
        assert (await a.ok("warp_work_claim"))["item"]["id"] == item["id"]
        bad = [{"name": "log", "parts": [{"kind": "url", "url": "javascript:s3cr3t()"}]}]
        refused = await a.err("warp_work_complete", {"work_id": item["id"], "artifacts": bad})
        assert "artifacts.0.parts.0" in refused and "http or https" in refused and "s3cr3t" not in refused
        handed = [
            {
                "name": "build",
                "description": "what CI made",
                "parts": [
                    {"kind": "file", "name": "sha256.txt", "media_type": "text/plain", "bytes": "YWJjCg=="},
                    {"kind": "url", "url": "https://ci.example.org/7/app.tar.gz", "name": "app.tar.gz"},
                    {"kind": "data", "data": {"size": 1024}},
                ],
            }
        ]
        done = await a.ok(
            "warp_work_complete", {"work_id": item["id"], "result": "built", "artifacts": handed}
        )
        assert done["item"]["status"] == "completed"
    stored = await work_queue(nc, ProjectNames(warp_env["LOOM_PROJECT_ID"])).get(item["id"])
    (artifact,) = stored.artifacts
    assert artifact.name == "build" and artifact.parts[0].bytes == b"abc\n"  # type: ignore[union-attr]
    assert [p.kind for p in artifact.parts] == ["file", "url", "data"]
