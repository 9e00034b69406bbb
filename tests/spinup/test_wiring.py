"""Weft installs the managed spin-up service by default (``WEFT_SPINUP=none`` turns it off)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from shared.models import TargetSpec
from shared.nats.server import EmbeddedNatsServer
from tests.spinup.conftest import EngineFactory, eventually, running_weft
from tests.spinup.stubs import Seen, StubServer
from weft.settings import WeftSettings
from weft.spinup import DisabledSpinup, TargetConfigError, default_service
from weft.spinup.managed import ManagedSpinup


def test_default_service_is_managed_and_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = WeftSettings(project_id="wiring")
    assert isinstance(default_service(settings), ManagedSpinup)
    monkeypatch.setenv("WEFT_SPINUP", "none")
    off = default_service(settings)
    assert isinstance(off, DisabledSpinup) and off.name == "none"
    with pytest.raises(TargetConfigError, match=r"config\.command"):  # targets are still checked
        off.validate_target(TargetSpec(name="x", mechanism="local", config={}))
    monkeypatch.setenv("WEFT_SPINUP", "sometimes")
    with pytest.raises(ValidationError, match="WEFT_SPINUP"):
        default_service(settings)


@pytest.fixture
async def receiver() -> AsyncIterator[StubServer]:
    def accept(_: Seen) -> tuple[int, Any]:
        return 202, {"id": "queued-1"}

    server = await StubServer(accept).start()
    try:
        yield server
    finally:
        await server.stop()


async def test_a_default_weft_spins_up_through_its_routes(
    nats_server: EmbeddedNatsServer, project_id: str, receiver: StubServer
) -> None:
    async with running_weft(nats_server.url, project_id, None) as weft, weft.client(project_id) as api:
        body = {
            "name": "hook",
            "mechanism": "webhook",
            "capabilities": ["code"],
            "config": {"url": f"{receiver.url}/go"},
        }
        target = (await api.post("/api/targets", json=body)).json()
        started = await api.post(f"/api/targets/{target['id']}/spin-up")
        assert started.status_code == 202, started.text

        async def called() -> bool:
            return bool(receiver.calls("POST", "/go"))

        await eventually(called, what="the webhook call")
        assert receiver.calls("POST", "/go")[0].json()["spinup_id"] == started.json()["id"]
        stats = (await api.get("/api/stats")).json()
        assert stats["spinups"]["mechanism"] == "managed" and stats["spinups"]["total"] == 1


async def test_a_weft_with_spinup_off_checks_targets_and_reports_other_replicas_operations(
    nats_server: EmbeddedNatsServer,
    project_id: str,
    receiver: StubServer,
    engine_factory: EngineFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEFT_SPINUP", "none")
    async with (
        running_weft(nats_server.url, project_id, None, expect=DisabledSpinup) as weft,
        weft.client(project_id) as api,
    ):
        bad = await api.post("/api/targets", json={"name": "bad", "mechanism": "local", "config": {}})
        assert bad.status_code == 422 and bad.json()["details"]["field"] == "config.command"
        assert (await api.get("/api/stats")).json()["spinups"] == {
            "total": 0,
            "by_state": {},
            "mechanism": "none",
        }
        body = {
            "name": "hook",
            "mechanism": "webhook",
            "capabilities": ["code"],
            "config": {"url": f"{receiver.url}/go"},
        }
        target = (await api.post("/api/targets", json=body)).json()
        refused = await api.post(f"/api/targets/{target['id']}/spin-up")
        assert refused.status_code == 409 and refused.json()["error"] == "spinup_unavailable"

        other = await engine_factory()  # a managed replica elsewhere starts one
        monkeypatch.delenv("WEFT_SPINUP")
        op = await (await other.manager(project_id)).spin_up(target["id"])
        stats = (await api.get("/api/stats")).json()["spinups"]
        assert stats["total"] == 1 and stats["mechanism"] == "none"
        assert op.id


def test_the_demo_agent_starts_without_importing_the_mechanisms_or_nats() -> None:
    """Every spun-up demo agent imports this package; the mechanisms (asyncssh, httpx) and
    nats-py are Weft's, not the agent's, and cost it a visible share of its start-up."""
    import subprocess
    import sys

    probe = (
        "import sys, weft.spinup.demo_agent; "
        "print(sorted(m for m in ('asyncssh', 'nats', 'weft.spinup.mechanisms') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
