"""Error paths not covered next to their resource: bad cursors everywhere, NATS going away."""

from __future__ import annotations

from typing import Any

from weft_helpers import eventually

from shared.nats.server import EmbeddedNatsServer, ServerConfig
from shared.settings import NatsSettings


async def test_every_listing_refuses_a_foreign_cursor(api: Any) -> None:
    for path in ("/api/work", "/api/agents", "/api/targets", "/api/dlq"):
        response = await api.get(path, params={"cursor": "not-a-cursor!"})
        assert response.status_code == 400, path
        assert (
            response.json()["error"] == "invalid_cursor" and response.json()["details"]["field"] == "cursor"
        )
    # a cursor of one listing is not a cursor of another
    await api.post("/api/work", json={"task_id": "a", "description": "d", "capability": "code"})
    await api.post("/api/work", json={"task_id": "b", "description": "d", "capability": "code"})
    work_cursor = (await api.get("/api/work", params={"limit": 1})).json()["next_cursor"]
    assert work_cursor
    assert (await api.get("/api/agents", params={"cursor": work_cursor})).status_code == 400
    assert (await api.get("/api/targets", params={"cursor": work_cursor})).status_code == 400


async def test_nats_going_away_is_a_503_not_a_crash(weft_factory: Any, project_id: str) -> None:
    server = EmbeddedNatsServer(ServerConfig()).start()
    try:
        async with (
            weft_factory(project_id=project_id, nats=NatsSettings(url=server.url)) as weft,
            weft.client() as api,
        ):
            work = (
                await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "x"})
            ).json()
            server.kill()

            async def degraded() -> bool:
                health = await api.get("/health")
                return health.status_code == 503 and health.json()["status"] == "degraded"

            await eventually(degraded, what="/health to report NATS gone")
            response = await api.get(f"/api/work/{work['id']}", timeout=30)
            assert response.status_code == 503, response.text
            assert response.json()["error"] in ("nats_unavailable", "jetstream_error")
            assert (await api.get("/metrics")).status_code == 200
    finally:
        server.stop()
