"""``webhook`` mechanism against a real HTTP receiver that records what it gets."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import SpinupState, Target, WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.redact import install_redaction
from tests.spinup.conftest import EngineFactory, eventually, published_events, register_agent
from tests.spinup.stubs import Seen, StubServer
from testsupport.work import work_queue
from weft.spinup.mechanisms import parse_config
from weft.spinup.mechanisms.base import Launch, MechanismError
from weft.spinup.mechanisms.webhook import WebhookMechanism

SECRET = "whsec-7f3a9c1e-do-not-leak"
MakeTarget = Callable[..., Awaitable[Target]]


@pytest.fixture
async def receiver() -> AsyncIterator[StubServer]:
    def answer(seen: Seen) -> tuple[int, Any]:
        if seen.path == "/spawn":
            return 201, {"id": "job-7"}
        if seen.path == "/stop":
            return 200, {"stopped": True}
        if seen.path == "/healthz":
            return 204, None
        if seen.path == "/broken":
            return 500, {"error": "runner pool exhausted"}
        return 404, {"error": "no such path"}

    server = await StubServer(answer).start()
    try:
        yield server
    finally:
        await server.stop()


def webhook_config(receiver: StubServer, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "url": f"{receiver.url}/spawn?target={{target_name}}",
        "headers": {"X-Team": "platform", "X-Work": "{work_id}"},
        "body": (
            '{"agent": "{agent_id}", "work": "{work_id}", "spinup": "{spinup_id}", '
            '"project": "{project_id}", "target": "{target_id}", "name": "{target_name}"}'
        ),
        "secret_env": "LOOM_TEST_WEBHOOK_SECRET",
        "stop_url": f"{receiver.url}/stop",
        "health_url": f"{receiver.url}/healthz",
    }
    config.update(changes)
    return config


def signature(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


async def test_start_sends_the_templated_signed_body_and_idle_stop_calls_the_stop_url(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("LOOM_TEST_WEBHOOK_SECRET", SECRET)
    caplog.set_level(logging.DEBUG)
    install_redaction()
    engine = await engine_factory(shutdown_grace_s=0.3)
    target = await make_target(
        name="ci-pool", mechanism="webhook", config=webhook_config(receiver), idle_timeout_s=0.5
    )
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="hook", description="d", capability="code"))
    decision = await engine.request_for_work(project_id, item)
    op = decision.operation
    assert op is not None, decision.detail
    manager = await engine.manager(project_id)

    async def running() -> Any:
        record = await manager.store.get(op.id)
        return record if record.op.state is SpinupState.RUNNING else None

    started = await eventually(running, what="the webhook start")
    [call] = receiver.calls("POST", "/spawn")
    assert call.query == {"target": "ci-pool"}
    assert call.json() == {
        "agent": op.agent_id,
        "work": item.id,
        "spinup": op.id,
        "project": project_id,
        "target": target.id,
        "name": "ci-pool",
    }
    assert call.headers["X-Loom-Signature"] == signature(call.body)
    assert call.headers["X-Team"] == "platform" and call.headers["X-Work"] == item.id
    assert call.headers["Content-Type"] == "application/json"
    assert started.op.handle["remote_id"] == "job-7" and started.op.handle["status"] == "201"

    # the worker behind the webhook starts Warp, which registers under the id Weft chose
    await register_agent(
        nc, project_id, op.agent_id, spinup_id=op.id, target_id=target.id, capabilities=["code"]
    )

    async def stopped() -> Any:
        record = await manager.store.get(op.id)
        return record if record.op.state is SpinupState.STOPPED else None

    final = await eventually(stopped, what="idle shutdown and the stop call")
    assert final.shutdown_reason and "idle" in final.shutdown_reason
    [stop] = receiver.calls("POST", "/stop")
    assert stop.json()["remote_id"] == "job-7" and stop.json()["spinup_id"] == op.id
    assert stop.json()["action"] == "stop"
    assert stop.headers["X-Loom-Signature"] == signature(stop.body)

    actions = [e.action for e in await published_events(nc, names, "spinup") if e.subject_id == op.id]
    assert actions[-4:] == ["registered", "shutdown-requested", "stopping", "stopped"]
    everything = json.dumps([e.model_dump(mode="json") for e in await published_events(nc, names, "spinup")])
    everything += final.model_dump_json() + caplog.text
    everything += "".join(r.getMessage() for r in caplog.records)
    assert SECRET not in everything


async def test_a_failing_webhook_fails_the_operation_and_the_work_waits(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOOM_TEST_WEBHOOK_SECRET", SECRET)
    engine = await engine_factory()
    await make_target(
        name="flaky",
        mechanism="webhook",
        config=webhook_config(receiver, url=f"{receiver.url}/broken"),
        cooldown_s=60,
    )
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="w", description="d", capability="code"))
    decision = await engine.request_for_work(project_id, item)
    assert decision.operation is not None
    manager = await engine.manager(project_id)

    async def failed() -> Any:
        record = await manager.store.get(decision.operation.id)  # type: ignore[union-attr]
        if record.op.state is not SpinupState.FAILED:
            return None
        # the target's slot is freed (after the clean-up) a moment after the failure is recorded
        slot = await manager.store.slot(record.op.target_id)
        return record if slot.in_flight is None and slot.live == [] else None

    record = await eventually(failed, what="the failed start")
    assert "answered 500, not one of the success codes" in (record.op.error or "")
    assert "runner pool exhausted" in (record.op.error or "")
    assert (await work.get(item.id)).status is WorkStatus.QUEUED
    assert (await work.queue_depths()).get("code") == 1
    # the cool-down holds off the next attempt: no second call to the receiver
    again = await engine.request_for_work(project_id, item)
    assert again.outcome == "deferred" and [r.code for _, r in again.refusals] == ["cooldown"]
    assert len(receiver.calls("POST", "/broken")) == 1


async def test_missing_secret_env_fails_the_start_naming_the_setting(receiver: StubServer) -> None:
    config = parse_config("webhook", webhook_config(receiver, secret_env="LOOM_TEST_UNSET_SECRET"))
    launch = Launch("a" * 32, "b" * 32, "p1", "c" * 32, "ci-pool", "nats://127.0.0.1:4222")

    async def ignore(_: dict[str, str]) -> None:
        return None

    with pytest.raises(
        MechanismError, match=r"config\.secret_env: environment variable LOOM_TEST_UNSET_SECRET"
    ):
        await WebhookMechanism().start(config, launch, ignore)
    assert receiver.requests == []


async def test_default_body_unsigned_without_secret_and_custom_success_codes(receiver: StubServer) -> None:
    config = parse_config(
        "webhook",
        {"url": f"{receiver.url}/spawn", "success_codes": [202], "method": "PUT"},
    )
    launch = Launch("a" * 32, "b" * 32, "p1", "c" * 32, "ci-pool", "nats://127.0.0.1:4222", work_id="d" * 32)

    async def ignore(_: dict[str, str]) -> None:
        return None

    with pytest.raises(MechanismError, match="answered 201, not one of the success codes"):
        await WebhookMechanism().start(config, launch, ignore)  # 201 is not the configured 202
    [call] = receiver.calls("PUT", "/spawn")
    assert call.json() == {
        "agent_id": "b" * 32,
        "project_id": "p1",
        "spinup_id": "a" * 32,
        "target_id": "c" * 32,
        "target_name": "ci-pool",
        "work_id": "d" * 32,
    }
    assert "X-Loom-Signature" not in call.headers


async def test_health_probe_uses_the_health_url(receiver: StubServer) -> None:
    mechanism = WebhookMechanism()
    ok = await mechanism.probe(parse_config("webhook", webhook_config(receiver)), 5)
    assert ok.ok is True and ok.detail == "health_url answered 204"
    bad = await mechanism.probe(
        parse_config("webhook", webhook_config(receiver, health_url=f"{receiver.url}/broken")), 5
    )
    assert bad.ok is False and "500" in bad.detail
    unreachable = await mechanism.probe(
        parse_config("webhook", webhook_config(receiver, health_url="http://127.0.0.1:9/x")), 2
    )
    assert unreachable.ok is False and "ConnectError" in unreachable.detail
