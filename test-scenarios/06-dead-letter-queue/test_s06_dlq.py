"""Scenario 6: work that keeps failing ends in the dead-letter queue; an operator retries it.

An item submitted with Shuttle (3 attempts) fails on every attempt of a flaky agent
and lands in the DLQ with the error of each attempt. The operator sees it with
``shuttle dlq list``, retries it with ``shuttle dlq retry``, and a healthy agent
completes it. An item failed as not retryable goes to the DLQ at once and is discarded.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from scenario_harness import Fabric, agents_in


def rows(listing: Any) -> list[dict[str, Any]]:
    return list(listing["items"] if isinstance(listing, dict) else listing)


async def test_failing_work_is_dead_lettered_then_retried_to_completion(fabric: Fabric) -> None:
    item = await fabric.shuttle_json(
        "submit", "migrate the database", "--capability", "migrate", "--max-attempts", "3"
    )
    assert item["status"] == "queued" and item["max_attempts"] == 3
    work_id = item["id"]

    async with AsyncExitStack() as stack:
        agents = await agents_in(stack, fabric, {"flaky": {"capabilities": ["migrate"]}})
        flaky = agents["flaky"]

        for attempt in (1, 2, 3):
            claimed = await flaky.claim()
            assert claimed is not None and claimed["id"] == work_id and claimed["attempts"] == attempt
            failed = await flaky.call(
                "warp_work_fail", work_id=work_id, error=f"lock timeout (try {attempt})"
            )
            expected = "dead-lettered" if attempt == 3 else "queued"
            assert failed["item"]["status"] == expected, failed["item"]
        assert await flaky.claim() is None  # nothing left to claim: it is in the DLQ

        # The agent and the operator both see it, with every attempt's error.
        dlq = await flaky.call("warp_dlq_list")
        assert [d["item"]["id"] for d in dlq["items"]] == [work_id]
        assert [e["error"] for e in dlq["items"][0]["item"]["errors"]] == [
            f"lock timeout (try {n})" for n in (1, 2, 3)
        ]
        listed = rows(await fabric.shuttle_json("dlq", "list"))
        assert [r["item"]["id"] if "item" in r else r["id"] for r in listed] == [work_id]
        status = await flaky.call("warp_work_queue_status")
        assert status["dead_letters"] == 1

        # The operator retries it: attempts start over, and a healthy agent finishes it.
        retried = await fabric.shuttle_json("dlq", "retry", work_id)
        assert retried["status"] == "queued" and retried["attempts"] == 0
        assert rows(await fabric.shuttle_json("dlq", "list")) == []
        healthy = await stack.enter_async_context(fabric.agent("healthy", capabilities=["migrate"]))
        claimed = await healthy.claim()
        assert claimed is not None and claimed["id"] == work_id and claimed["attempts"] == 1
        await healthy.call("warp_work_progress", work_id=work_id, percent=50, note="half the tables")
        await healthy.call("warp_work_complete", work_id=work_id, result={"tables": 12})

        shown = await fabric.shuttle_json("work", "show", work_id)
        assert shown["status"] == "completed" and shown["result"] == {"tables": 12}
        assert shown["assigned_to"] == healthy.agent_id
        assert len(shown["errors"]) == 3  # the history of the failed attempts is kept

        # Not retryable: straight to the DLQ on the first failure; then discarded for good.
        doomed = await fabric.shuttle_json("submit", "drop the prod table", "--capability", "migrate")
        claimed = await flaky.claim()
        assert claimed is not None and claimed["id"] == doomed["id"]
        failed = await flaky.call(
            "warp_work_fail", work_id=doomed["id"], error="refusing: destructive", retryable=False
        )
        assert failed["item"]["status"] == "dead-lettered" and failed["item"]["attempts"] == 1
        discard = await fabric.shuttle("dlq", "discard", doomed["id"], "--json")
        assert discard.exit_code == 0, discard.stderr
        assert rows(await fabric.shuttle_json("dlq", "list")) == []
        assert (await flaky.call("warp_work_queue_status"))["dead_letters"] == 0

        # Retrying what is no longer in the DLQ is refused clearly (exit 1: Weft said no).
        again = await fabric.shuttle("dlq", "retry", doomed["id"])
        assert again.exit_code == 1, (again.stdout, again.stderr)
        assert again.stderr.strip()
