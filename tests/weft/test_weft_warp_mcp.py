"""The whole loop with a real agent: Warp runs as an MCP server (stdio), a real MCP client session
drives it, Weft coordinates over REST and WebSocket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weft_helpers import WsClient, actions, eventually, ws_connect

from shared.nats.server import EmbeddedNatsServer
from testsupport.warp import warp_agent


async def test_submit_claim_progress_complete_through_a_real_warp_session(
    weft: Any, api: Any, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with warp_agent(nats_server.url, project_id, tmp_path) as agent:

        async def registered() -> dict[str, Any] | None:
            response = await api.get(f"/api/agents/{agent.agent_id}")
            return dict(response.json()) if response.status_code == 200 else None

        await agent.call("warp_work_queue_status")  # waits until Warp is connected
        shown = await eventually(registered, what="Warp's registration to show in /api/agents")
        assert shown["status"] == "online" and shown["capabilities"] == ["code"]

        async with ws_connect(f"{weft.ws_url}/api/ws?topics=work") as conn:
            ws = WsClient(conn)
            await ws.next_of("welcome")
            work = (
                await api.post(
                    "/api/work", json={"task_id": "mcp-1", "description": "fix it", "capability": "code"}
                )
            ).json()
            assert work["status"] == "queued"

            claimed = await agent.call("warp_work_claim")
            assert claimed["claimed"] and claimed["item"]["id"] == work["id"]
            item = (await api.get(f"/api/work/{work['id']}")).json()
            assert item["status"] == "claimed" and item["assigned_to"] == agent.agent_id

            await agent.call(
                "warp_work_progress", {"work_id": work["id"], "percent": 60, "note": "tests pass"}
            )
            item = (await api.get(f"/api/work/{work['id']}")).json()
            assert item["status"] == "in-progress" and item["progress"]["percent"] == 60

            await agent.call("warp_work_complete", {"work_id": work["id"], "result": {"commit": "abc123"}})
            item = (await api.get(f"/api/work/{work['id']}")).json()
            assert item["status"] == "completed" and item["result"] == {"commit": "abc123"}

            events = await ws.events_until(lambda evs: "work.completed" in actions(evs, work["id"]))
        assert actions(events, work["id"]) == [
            "work.submitted",
            "work.queued",
            "work.claimed",
            "work.progress",
            "work.completed",
        ]

        # Weft asks the agent to shut down: Warp drains, deregisters and exits.
        response = await api.post(f"/api/agents/{agent.agent_id}/shutdown", json={"reason": "test over"})
        assert response.status_code == 202

        async def gone() -> bool:
            response = await api.get(f"/api/agents/{agent.agent_id}")
            return response.status_code == 404 or response.json()["status"] == "offline"

        await eventually(gone, timeout=30, what="Warp to leave after the shutdown request")


async def test_real_warp_of_a_forbidden_type_never_claims_corporate_work(
    weft_factory: Any, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("boundaries:\n  corporate:\n    allowed_agent_types: [copilot]\n")
    async with (
        weft_factory(project_id=project_id, policy_file=policy) as weft,
        weft.client() as api,
        warp_agent(
            nats_server.url,
            project_id,
            tmp_path,
            LOOM_AGENT_TYPE="claude-code",
            LOOM_BOUNDARIES="default,corporate",
        ) as agent,
    ):
        await agent.call("warp_work_queue_status")
        corporate = {"task_id": "c", "description": "d", "capability": "code", "boundary": "corporate"}
        work = (await api.post("/api/work", json=corporate)).json()
        for _ in range(3):
            out = await agent.call("warp_work_claim")
            assert out["claimed"] is False
        assert (await api.get(f"/api/work/{work['id']}")).json()["status"] == "queued"
        # the same agent still takes work its type may take
        allowed = (
            await api.post("/api/work", json={**corporate, "task_id": "d", "boundary": "default"})
        ).json()
        out = await agent.call("warp_work_claim")
        assert out["claimed"] and out["item"]["id"] == allowed["id"]
