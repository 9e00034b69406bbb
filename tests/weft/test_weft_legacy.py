"""Weft configured and called the TypeScript Weft's way: read with that meaning, or refused
naming ours (docs/migrating.md). Unknown query parameters are refused, never ignored."""

from __future__ import annotations

import importlib
import pkgutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute, APIWebSocketRoute
from test_weft_cli import WEFT, wait_healthy, weft_process
from test_weft_cli import clean_env as process_env

from shared.nats.server import EmbeddedNatsServer, free_port
from testsupport.env import strip_fabric
from weft import routes
from weft.app import create_app
from weft.settings import WeftSettings
from weft.spinup import DisabledSpinup
from weft.strictquery import no_unknown_query

SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="


def problems(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 422, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == "validation_error"
    assert SECRET not in response.text
    return {p["field"]: p["message"] for p in body["details"]["errors"]}


async def test_unknown_query_parameters_are_refused(api: httpx.AsyncClient) -> None:
    found = problems(await api.get("/api/channels", params={"projectId": "elsewhere"}))
    assert found == {
        "projectId": "this is the TypeScript Weft's name; use project (or the X-Loom-Project header)"
    }
    found = problems(await api.get("/api/work", params={"classification": "corporate", "colour": "red"}))
    assert found["classification"].endswith("use boundary")
    assert found["colour"].startswith("unknown query parameter (this route takes: ")
    assert "assigned_to" in found["colour"] and "project" in found["colour"]
    assert set(problems(await api.get("/api/agents", params={SECRET: "1"}))) == {"*"}
    assert set(problems(await api.get("/health", params={"verbose": "1"}))) == {"verbose"}
    # what the routes declare still works, including the project parameter of a dependency
    assert (await api.get("/api/work", params={"status": "queued", "limit": 5})).status_code == 200
    assert (await api.get("/api/channels", params={"project": "other-project"})).status_code == 200


async def test_the_originals_body_fields_name_ours(api: httpx.AsyncClient) -> None:
    found = problems(
        await api.post("/api/work", json={"taskId": "t", "description": "d", "capability": "code"})
    )
    assert found["taskId"] == "this is the TypeScript Weft's name; use task_id"
    found = problems(await api.post(f"/api/agents/{'a' * 32}/shutdown", json={"graceful": True}))
    assert "grace_s" in found["graceful"]
    found = problems(await api.post("/api/agents/shutdown-batch", json={"agentGuids": ["x"], SECRET: 1}))
    assert found["agentGuids"].endswith("use agent_ids") and "*" in found


def test_every_route_checks_its_query_first_and_apps_share_the_routes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Weft's app holds its routers' own routes (``weft.app``): nothing app-wide reaches them,
    so each lists the query check itself, ahead of its token check; and a second app is
    made of the same route objects, built once per process instead of once per app."""
    strip_fabric(monkeypatch)
    first, second = (create_app(WeftSettings(project_id="p1"), spinup=DisabledSpinup()) for _ in range(2))
    checked = [r for r in first.routes if isinstance(r, APIRoute | APIWebSocketRoute)]
    assert len(checked) > 80
    for route in checked:
        assert route.dependencies and route.dependencies[0].dependency is no_unknown_query, route.path
    routers = [
        module.router
        for info in pkgutil.iter_modules(routes.__path__)
        if isinstance(
            getattr(module := importlib.import_module(f"weft.routes.{info.name}"), "router", None), APIRouter
        )
    ]
    assert len(routers) >= 20
    in_first, in_second = ({id(route) for route in app.routes} for app in (first, second))
    for router in routers:
        for route in router.routes:
            assert id(route) in in_first and id(route) in in_second, route.path


async def test_serve_reads_the_originals_api_settings(
    tmp_path: Path, nats_server: EmbeddedNatsServer
) -> None:
    port = free_port()
    env = process_env(
        tmp_path, NATS_URL=nats_server.url, API_PORT=str(port), API_TOKENS=SECRET, LOG_LEVEL="warn"
    )
    with weft_process(["serve"], env) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/api/work")).status_code == 401
            assert (
                await client.get("/api/work", headers={"Authorization": f"Bearer {SECRET}"})
            ).status_code == 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert "API_TOKENS (a setting of the TypeScript Weft) is translated to WEFT_API_TOKENS" in stderr
    assert "API_PORT" in stderr and SECRET not in stderr
    assert " INFO " not in stderr  # LOG_LEVEL=warn was read


def test_serve_refuses_what_it_cannot_honour(tmp_path: Path, nats_server: EmbeddedNatsServer) -> None:
    for extra, words in (
        ({"IDLE_TIMEOUT_MS": "300000"}, "idle_timeout_s"),
        ({"API_TOKENS": SECRET, "WEFT_API_TOKENS": "other"}, "API_TOKENS and WEFT_API_TOKENS"),
        ({"API_PORT": SECRET}, "API_PORT: must be a port number"),
    ):
        env = process_env(tmp_path, NATS_URL=nats_server.url, **extra)
        done = subprocess.run(
            [WEFT, "serve"], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        assert done.returncode == 2, done.stderr
        assert words in done.stderr and SECRET not in done.stderr and done.stderr.startswith("weft: ")
