"""Error paths not covered next to their resource: bad cursors everywhere, NATS going away."""

from __future__ import annotations

from typing import Any

import nats.errors
import pytest
from weft_helpers import eventually

from shared.nats.server import EmbeddedNatsServer, ServerConfig
from shared.settings import NatsSettings
from testsupport.natsfailures import FAILURES, SECRET


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


async def test_nats_failures_are_503_with_the_code_every_part_gives(
    weft: Any, api: Any, project_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale connection is a 503 ``nats_unavailable`` (it was a 500 ``internal``), as in
    Warp and Pattern; every failure shared.nats.failures knows gets the same code here."""
    project = await weft.server.config.app.state.weft.hub.get(project_id)
    failure: list[BaseException] = []

    async def failing(*_: object, **__: object) -> None:
        raise failure[0]

    monkeypatch.setattr(project.queue, "get", failing)
    answered: dict[str, dict[str, Any]] = {}
    for name, (make, _) in FAILURES.items():
        failure[:] = [make()]
        response = await api.get(f"/api/work/{'0' * 32}")
        assert response.status_code == 503, (name, response.text)
        assert SECRET not in response.text
        retry_after = "1" if response.json()["error"] == "nats_unavailable" else None
        assert response.headers.get("Retry-After") == retry_after, name
        answered[name] = response.json()
    assert answered["stale-connection"] == {
        "error": "nats_unavailable",
        "message": "NATS is unreachable (StaleConnectionError). Try again shortly.",
        "details": None,
    }
    assert {name: body["error"] for name, body in answered.items()} == {
        name: code for name, (_, code) in FAILURES.items()
    }
    failure[:] = [nats.errors.BadSubjectError()]  # a NATS error no part anticipates: a bug
    response = await api.get(f"/api/work/{'0' * 32}")
    assert (response.status_code, response.json()["error"]) == (500, "internal")
