"""Weft configured and called the TypeScript Weft's way: read with that meaning, or refused
naming ours (docs/migrating.md). Unknown query parameters are refused, never ignored."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
from test_weft_cli import WEFT, wait_healthy, weft_process
from test_weft_cli import clean_env as process_env

from shared.nats.server import EmbeddedNatsServer, free_port

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
