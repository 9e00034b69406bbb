"""Spin-up through Weft's REST API: a real Weft, real NATS, real agent processes."""

from __future__ import annotations

import logging
import sys
from typing import Any

import httpx
import pytest

from shared.models import SpinupState
from shared.redact import install_redaction
from tests.spinup.conftest import (
    ROOT,
    RunningWeft,
    demo_agent_command,
    eventually,
    list_operations,
)
from tests.spinup.stubs import Seen, StubServer
from testsupport.processes import pid_alive


def local_target(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "laptop",
        "capabilities": ["code"],
        "mechanism": "local",
        "config": {"command": demo_agent_command(), "cwd": str(ROOT), "env": {"LOOM_HEARTBEAT_S": "1"}},
        "idle_timeout_s": 2,
    }
    body.update(changes)
    return body


async def test_submit_with_no_agent_online_spins_up_a_local_agent_that_completes_and_idles_out(
    weft: RunningWeft, api: httpx.AsyncClient, project_id: str
) -> None:
    created = await api.post("/api/targets", json=local_target())
    assert created.status_code == 201, created.text
    submitted = await api.post("/api/work", json={"task_id": "e2e", "description": "d", "capability": "code"})
    assert submitted.status_code in (200, 201, 202), submitted.text
    work_id = submitted.json()["id"]

    async def completed() -> dict[str, Any] | None:
        item = (await api.get(f"/api/work/{work_id}")).json()
        return item if item["status"] == "completed" else None

    done = await eventually(completed, what="the spawned agent to complete the work")
    agent_id = done["assigned_to"]
    assert done["result"]["done_by"] == agent_id

    operations = await list_operations(weft.spinup, project_id)
    assert [op.agent_id for op in operations] == [agent_id]
    op = operations[0]
    assert op.work_id == work_id and op.reason == "routing" and op.target_id == created.json()["id"]
    pid = int(op.handle["pid"])
    agent = (await api.get(f"/api/agents/{agent_id}")).json()
    assert agent["target_id"] == op.target_id and agent["spinup_id"] == op.id

    async def stopped() -> Any:
        ops = await list_operations(weft.spinup, project_id)
        return ops[0] if ops[0].state is SpinupState.STOPPED else None

    final = await eventually(stopped, what="idle shutdown")
    assert final.stopped_at is not None
    assert not pid_alive(pid)
    stats = (await api.get("/api/stats")).json()
    assert stats["spinups"]["by_state"] == {"stopped": 1} and stats["spinups"]["mechanism"] == "managed"
    target = (await api.get("/api/targets/laptop")).json()
    assert target["last_spinup_at"] is not None


async def test_bad_configs_are_rejected_naming_the_field(api: httpx.AsyncClient) -> None:
    cases = [
        ({"mechanism": "local", "config": {}}, "config.command"),
        ({"mechanism": "local", "config": {"command": ["x"], "cwd": "relative"}}, "config.cwd"),
        (
            {
                "mechanism": "ssh",
                "config": {"host": "h", "username": "u", "command": ["a"], "key_file": "/k"},
            },
            "config.known_hosts",
        ),
        ({"mechanism": "webhook", "config": {"url": "ftp://x"}}, "config.url"),
        ({"mechanism": "webhook", "config": {"url": "https://x", "body": "{nope}"}}, "config.body"),
        (
            {"mechanism": "github-actions", "config": {"repository": "x", "workflow": "w.yml"}},
            "config.repository",
        ),
        ({"mechanism": "kubernetes", "config": {"image": "i", "namespace": "Bad_NS"}}, "config.namespace"),
        (
            {
                "mechanism": "github-actions",
                "config": {"repository": "a/b", "workflow": "w.yml", "token": "ghp_s3cr3tvalue"},
            },
            "config.token",
        ),
    ]
    for changes, field in cases:
        response = await api.post("/api/targets", json=local_target(name="bad", **changes))
        assert response.status_code == 422, (changes, response.text)
        body = response.json()
        assert body["details"]["field"] == field, body
        assert field in body["message"]
        assert "ghp_s3cr3tvalue" not in response.text
    assert (await api.get("/api/targets")).json()["items"] == []

    created = (await api.post("/api/targets", json=local_target())).json()
    patched = await api.patch(f"/api/targets/{created['id']}", json={"config": {"command": []}})
    assert patched.status_code == 422 and patched.json()["details"]["field"] == "config.command"
    changed = await api.patch(f"/api/targets/{created['id']}", json={"mechanism": "webhook"})
    assert changed.status_code == 422 and changed.json()["details"]["field"] == "config.url"


async def test_test_route_probes_now_and_unhealthy_targets_are_skipped_by_routing(
    weft: RunningWeft, api: httpx.AsyncClient, project_id: str
) -> None:
    good = (await api.post("/api/targets", json=local_target())).json()
    result = await api.post(f"/api/targets/{good['id']}/test")
    assert result.status_code == 200, result.text
    assert result.json()["ok"] is True and result.json()["health"] == "healthy"

    broken = local_target(name="broken", config={"command": ["/nonexistent/agent"]})
    bad = (await api.post("/api/targets", json=broken)).json()
    answer = (await api.post("/api/targets/broken/test")).json()
    assert answer["ok"] is False and answer["health"] == "unhealthy"
    assert "not an executable program" in answer["detail"]
    shown = (await api.get(f"/api/targets/{bad['id']}")).json()
    assert shown["health"] == "unhealthy" and shown["last_health_check"] is not None
    assert "not an executable program" in shown["health_detail"]

    await api.post(f"/api/targets/{good['id']}/disable")
    submitted = (
        await api.post("/api/work", json={"task_id": "w", "description": "d", "capability": "code"})
    ).json()

    async def waiting() -> Any:
        item = (await api.get(f"/api/work/{submitted['id']}")).json()
        return item if item["waiting_reason"] else None

    item = await eventually(waiting, what="the routing verdict")
    assert item["status"] == "queued"
    assert await list_operations(weft.spinup, project_id) == []


async def test_manual_spin_up_respects_one_in_flight_and_names_unknown_targets(
    weft: RunningWeft, api: httpx.AsyncClient, project_id: str
) -> None:
    silent = local_target(config={"command": [sys.executable, "-c", "import time; time.sleep(60)"]})
    target = (await api.post("/api/targets", json=silent)).json()
    first = await api.post(f"/api/targets/{target['id']}/spin-up")
    assert first.status_code == 202, first.text
    assert first.json()["reason"] == "manual" and first.json()["target_id"] == target["id"]
    second = await api.post("/api/targets/laptop/spin-up")
    assert second.status_code == 409 and second.json()["error"] == "conflict"
    assert "already starting an agent" in second.json()["message"]
    missing = await api.post("/api/targets/nope/spin-up")
    assert missing.status_code == 404

    await api.post(f"/api/targets/{target['id']}/disable")
    disabled = await api.post(f"/api/targets/{target['id']}/spin-up")
    assert disabled.status_code == 409 and "disabled" in disabled.json()["message"]


async def test_a_token_never_reaches_responses_operations_or_logs(
    weft: RunningWeft,
    api: httpx.AsyncClient,
    project_id: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A GitHub stub that echoes the Authorization header back in its error messages."""
    token = "ghp_EchoedBackByAMisbehavingServer0001"
    monkeypatch.setenv("LOOM_TEST_ECHO_TOKEN", token)
    caplog.set_level(logging.DEBUG)
    install_redaction()

    def echo(seen: Seen) -> tuple[int, Any]:
        return 403, {"message": f"forbidden for {seen.headers.get('Authorization')}"}

    server = await StubServer(echo).start()
    try:
        body = {
            "name": "gh",
            "capabilities": ["code"],
            "mechanism": "github-actions",
            "config": {
                "repository": "acme/agents",
                "workflow": "agent.yml",
                "token_env": "LOOM_TEST_ECHO_TOKEN",
                "api_url": server.url,
            },
        }
        created = await api.post("/api/targets", json=body)
        tested = await api.post("/api/targets/gh/test")
        started = await api.post("/api/targets/gh/spin-up")
        assert started.status_code == 202

        async def failed() -> Any:
            ops = await list_operations(weft.spinup, project_id)
            return ops[0] if ops and ops[0].state is SpinupState.FAILED else None

        op = await eventually(failed, what="the refused dispatch")
        texts = [created.text, tested.text, started.text, op.model_dump_json()]
        texts += [(await api.get(path)).text for path in ("/api/targets", "/api/targets/gh", "/api/stats")]
    finally:
        await server.stop()
    assert server.requests and server.requests[0].headers["Authorization"] == f"Bearer {token}"
    assert "GitHub refused the workflow dispatch (403)" in (op.error or "")
    assert "Bearer ***" in (op.error or "")
    everything = "\n".join([*texts, caplog.text, *(r.getMessage() for r in caplog.records)])
    assert token not in everything
