"""Scenario 8: Weft's REST API end to end — submit, list, show, cancel, stats — with a live agent.

An operator's script talks HTTP to Weft while a Warp agent works the queue: items are
submitted and listed (filtered, paged), one is shown, a queued one and a claimed one are
cancelled (the agent is refused when it tries to finish cancelled work), and the stats
add up. Bad requests get 4xx with an error body naming the field, never a 5xx.
"""

from __future__ import annotations

from typing import Any

import httpx
from scenario_harness import Fabric, eventually


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    assert {"error", "message"} <= set(body), body
    return dict(body)


async def submit(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await api.post("/api/work", json=fields)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_submit_list_show_cancel_and_stats_over_rest(fabric: Fabric) -> None:
    async with fabric.api() as api, fabric.agent("builder", capabilities=["build"]) as builder:
        assert (await api.get("/health")).status_code == 200
        # Weft builds its OpenAPI document at the first request (about 2 s of CPU here), in
        # the test process's thread: a loaded machine needs longer than the client's 15 s
        paths = (await api.get("/openapi.json", timeout=120)).json()["paths"]
        assert {"/api/work", "/api/work/{work_id}", "/api/work/{work_id}/cancel", "/api/stats"} <= set(paths)

        # Submit: the item comes back queued, with what was asked.
        items = [
            await submit(
                api,
                task_id=f"t-{n}",
                description=f"build {n}",
                capability="build",
                priority=1 + n,
                context={"n": n},
            )
            for n in range(5)
        ]
        lint = await submit(api, task_id="lint", description="lint", capability="lint", boundary="default")
        assert all(i["status"] == "queued" and i["attempts"] == 0 for i in items)
        assert items[4]["priority"] == 5 and items[4]["context"] == {"n": 4}

        # Bad input: 4xx naming the field, nothing queued.
        bad = error_of(
            await api.post("/api/work", json={"description": "x", "capability": "build", "priority": 11})
        )
        assert "priority" in str(bad)
        bad = error_of(await api.post("/api/work", json={"description": "x", "capability": "a.b"}))
        assert "capability" in str(bad)
        bad = error_of(
            await api.post("/api/work", json={"description": "x", "capability": "b", "colour": "red"})
        )
        assert "colour" in str(bad)
        assert error_of(await api.get("/api/work/" + "0" * 32))["error"] == "not_found"
        assert "work_id" in str(error_of(await api.get("/api/work/not-an-id")))

        # List: newest first, filtered, paged with a cursor.
        listed = (await api.get("/api/work", params={"capability": "build"})).json()
        assert [i["id"] for i in listed["items"]] == [i["id"] for i in reversed(items)]
        seen: list[str] = []
        params: dict[str, Any] = {"limit": 2}
        while True:
            page = (await api.get("/api/work", params=params)).json()
            assert len(page["items"]) <= 2
            seen += [i["id"] for i in page["items"]]
            if not page.get("next_cursor"):
                break
            params = {"limit": 2, "cursor": page["next_cursor"]}
        assert sorted(seen) == sorted([i["id"] for i in items] + [lint["id"]])

        # Show one.
        shown = (await api.get(f"/api/work/{items[2]['id']}")).json()
        assert shown["task_id"] == "t-2" and shown["description"] == "build 2"

        # Cancel a queued item: it is never handed out.
        cancelled = (
            await api.post(f"/api/work/{items[0]['id']}/cancel", json={"reason": "not needed"})
        ).json()
        assert cancelled["status"] == "cancelled"
        again = await api.post(f"/api/work/{items[0]['id']}/cancel")
        assert again.status_code == 409 and error_of(again)["error"] == "conflict"

        # The agent claims the highest priority; Weft cancels it mid-work; finishing it is refused.
        claimed = await builder.claim()
        assert claimed is not None and claimed["id"] == items[4]["id"]
        await builder.call("warp_work_progress", work_id=claimed["id"], percent=30)
        response = await api.post(f"/api/work/{claimed['id']}/cancel", json={"reason": "superseded"})
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        refused = await builder.error("warp_work_complete", work_id=claimed["id"], result="done anyway")
        assert "cancel" in refused.lower()

        # The rest is worked to completion (never the cancelled one).
        done = []
        while (item := await builder.claim("build")) is not None:
            assert item["id"] not in (items[0]["id"], items[4]["id"])
            await builder.call("warp_work_complete", work_id=item["id"])
            done.append(item["id"])
        assert sorted(done) == sorted(i["id"] for i in items[1:4])

        # Stats add up.
        async def settled() -> dict[str, Any] | None:
            stats = dict((await api.get("/api/stats")).json())
            by_status = stats["work"]["by_status"]
            return stats if by_status["completed"] == 3 and by_status["cancelled"] == 2 else None

        stats = await eventually(settled, what="stats to show 3 completed and 2 cancelled")
        assert stats["project_id"] == fabric.project_id
        assert stats["work"]["total"] == 6 and stats["work"]["by_status"]["queued"] == 1
        assert stats["agents"]["total"] == 1
        assert stats["queue_depths"].get("lint") == 1 and not stats["queue_depths"].get("build")

        # Shuttle shows the same numbers.
        shuttle_stats = await fabric.shuttle_json("stats")
        assert shuttle_stats["work"]["by_status"] == stats["work"]["by_status"]
