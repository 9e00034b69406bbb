"""Tool-level error paths, through the SDK's in-memory client (no subprocess)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from mcp import Client
from nats.aio.client import Client as NatsClient
from pydantic import BaseModel, ValidationError
from warp_harness import make_identity, ok, text

from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from shared.work.rules import Claimant
from testsupport.natsfailures import FAILURES, SECRET
from testsupport.work import work_queue
from warp.errors import describe
from warp.runtime import WarpRuntime
from warp.server import build_server
from warp.settings import WarpSettings

A = "a" * 32
B = "b" * 32


@asynccontextmanager
async def session(
    url: str, project_id: str, project_dir: Path, **settings: Any
) -> AsyncIterator[tuple[Client, WarpRuntime]]:
    values: dict[str, Any] = {"capabilities": ("code",), "heartbeat_s": 5.0}
    values.update(settings)
    rt = WarpRuntime(make_identity(project_id, project_dir, A), WarpSettings(**values), nats_url=url)
    async with Client(build_server(rt)) as client:
        await rt.services()
        yield client, rt


async def err(client: Client, tool: str, args: dict[str, Any] | None = None) -> str:
    res = await client.call_tool(tool, args or {})
    assert res.is_error, text(res)
    return text(res)


async def test_bad_channel_config_is_reported_and_other_tools_keep_working(
    nats_server: EmbeddedNatsServer, project_id: str, project_dir: Path
) -> None:
    (project_dir / ".loom").mkdir()
    path = project_dir / ".loom" / "config.json"
    path.write_text(json.dumps({"channels": {"ops": {"max_messages": 0}}}))
    async with session(nats_server.url, project_id, project_dir) as (client, _):
        message = await err(client, "warp_channels_send", {"channel": "roadmap", "message": "x"})
        assert str(path) in message and "channels.ops.max_messages" in message
        assert str(path) in await err(client, "warp_channels_list")
        await ok(client, "warp_messages_read_direct")
        path.write_text(json.dumps({"channels": {"ops": {"max_messages": 5}}}))
        await ok(client, "warp_channels_send", {"channel": "ops", "message": "fixed"})


async def test_registry_error_paths_and_paging(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, project_dir: Path
) -> None:
    async with session(nats_server.url, project_id, project_dir) as (client, _):
        assert "you are not registered yet" in await err(client, "warp_registry_get_info")
        assert "registration: this agent is not registered" in await err(
            client, "warp_registry_update_presence", {"status": "busy"}
        )
        assert (await ok(client, "warp_registry_deregister"))["was_registered"] is False
        await ok(client, "warp_registry_register", {"handle": "first"})
        renamed = await ok(client, "warp_handle_set", {"handle": "second"})
        assert renamed["registered"] is True
        assert (await ok(client, "warp_registry_get_info"))["handle"] == "second"
        unknown = await err(client, "warp_registry_get_info", {"agent_id": B})
        assert "agent_id: no agent with this id" in unknown and B not in unknown
        from shared.agents.registry import Registry
        from shared.models import AgentEntry

        registry = Registry(nc.jetstream(), ProjectNames(project_id))
        for i in range(3):
            other = AgentEntry(
                agent_id=f"{i}" * 32, handle=f"peer-{i}", project_id=project_id, user_id="1" * 16
            )
            await registry.put(other)
        first = await ok(client, "warp_registry_discover", {"limit": 2})
        assert first["count"] == 4 and len(first["agents"]) == 2 and first["next_cursor"]
        rest = await ok(client, "warp_registry_discover", {"limit": 2, "cursor": first["next_cursor"]})
        assert len(rest["agents"]) == 2 and rest["next_cursor"] is None
        handles = [a["handle"] for a in first["agents"] + rest["agents"]]
        assert sorted(handles) == ["peer-0", "peer-1", "peer-2", "second"]
        assert "cursor" in await err(client, "warp_registry_discover", {"cursor": "bm9wZQ"})


async def test_work_error_paths(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, project_dir: Path
) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    async with session(nats_server.url, project_id, project_dir, capabilities=()) as (client, _):
        await ok(client, "warp_registry_register")
        nothing = await ok(client, "warp_work_claim")
        assert nothing == {
            "claimed": False,
            "item": None,
            "reason": "you registered no capabilities",
            "review": False,
            "context": None,
            "workstream": None,
        }
        await ok(client, "warp_registry_register", {"capabilities": ["code"]})
        assert "deadline: must be in the future" in await err(
            client,
            "warp_work_broadcast",
            {"description": "d", "capability": "code", "deadline": "2000-01-01T00:00:00Z"},
        )
        naive = await err(
            client,
            "warp_work_broadcast",
            {"description": "d", "capability": "code", "deadline": "2030-01-01T00:00"},
        )
        assert "deadline" in naive and "timezone" in naive
        assert "assigned_to: cannot be combined" in await err(
            client, "warp_work_list", {"mine": True, "assigned_to": B}
        )
        theirs = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"))
        claimed = await queue.claim(Claimant(agent_id=B, agent_type="generic", capabilities=("code",)))
        assert claimed is not None and claimed.id == theirs.id
        assert "claimed by another agent" in await err(client, "warp_work_complete", {"work_id": theirs.id})
        assert "no work item" in await err(client, "warp_dlq_retry", {"work_id": theirs.id})
        assert "no work item" in await err(client, "warp_dlq_discard", {"work_id": "e" * 32})
        assert "error" in await err(client, "warp_work_fail", {"work_id": theirs.id, "error": " "})


async def test_a_bug_is_reported_without_internals(
    nats_server: EmbeddedNatsServer, project_id: str, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with session(nats_server.url, project_id, project_dir) as (client, rt):
        svc = await rt.services()

        async def broken(*_: object, **__: object) -> None:
            raise RuntimeError("internal detail: token=abc123")

        monkeypatch.setattr(svc.channels, "send", broken)
        message = await err(client, "warp_channels_send", {"channel": "roadmap", "message": "x"})
        assert "warp_channels_send failed unexpectedly (RuntimeError)" in message
        assert "abc123" not in message and "internal detail" not in message


async def test_nats_failures_are_answered_as_every_part_answers_them(
    nats_server: EmbeddedNatsServer, project_id: str, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale connection is ``nats_unavailable``, as in Weft and Pattern; every failure
    shared.nats.failures knows gets the same code here (``FAILURES``, the parity list)."""
    async with session(nats_server.url, project_id, project_dir) as (client, rt):
        svc = await rt.services()
        failure: list[BaseException] = []

        async def failing(*_: object, **__: object) -> None:
            raise failure[0]

        monkeypatch.setattr(svc.channels, "send", failing)
        answered: dict[str, tuple[str, str]] = {}
        for name, (make, _) in FAILURES.items():
            failure[:] = [make()]
            res = await client.call_tool("warp_channels_send", {"channel": "roadmap", "message": "x"})
            assert res.is_error, name
            envelope = (res.meta or {})["loom/error"]
            assert envelope["message"] == text(res) and SECRET not in text(res)
            answered[name] = (envelope["error"], text(res))
    code, message = answered["stale-connection"]
    assert code == "nats_unavailable"
    assert message == (
        f"NATS at {nats_server.url} is unreachable (StaleConnectionError). "
        "Warp keeps reconnecting; retry in a few seconds."
    )
    assert {name: code for name, (code, _) in answered.items()} == {
        name: code for name, (_, code) in FAILURES.items()
    }


async def test_a_claim_stands_when_its_context_cannot_be_read(
    nats_server: EmbeddedNatsServer, project_id: str, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim is made before the hand-off is read: if NATS cannot give the context then,
    the agent is told it holds the item (and to read the context later), not that the tool
    failed while the item stays assigned to it."""
    async with session(nats_server.url, project_id, project_dir) as (client, rt):
        svc = await rt.services()
        await ok(client, "warp_registry_register", {"capabilities": ["code"]})
        submitted = await ok(client, "warp_work_broadcast", {"description": "d", "capability": "code"})

        async def timing_out(*_: object, **__: object) -> None:
            raise nats.errors.TimeoutError

        monkeypatch.setattr(svc.contexts, "tree", timing_out)
        res = await client.call_tool("warp_work_claim", {})
        assert not res.is_error, text(res)
        assert res.structured_content is not None
        claimed = res.structured_content
        assert claimed["claimed"] is True and claimed["context"] is None
        assert claimed["item"]["id"] == submitted["item"]["id"]
        assert "read it with warp_work_context" in text(res)
        monkeypatch.undo()
        assert (await ok(client, "warp_work_context", {"work_id": submitted["item"]["id"]}))["tree_id"] == (
            submitted["item"]["id"]
        )
        await ok(client, "warp_work_complete", {"work_id": submitted["item"]["id"], "result": "done"})

        async def broken(*_: object, **__: object) -> None:
            raise RuntimeError("a bug")

        await ok(client, "warp_work_broadcast", {"description": "d2", "capability": "code"})
        monkeypatch.setattr(svc.contexts, "tree", broken)
        assert "failed unexpectedly (RuntimeError)" in await err(client, "warp_work_claim", {})


class _Model(BaseModel):
    n: int


def test_describe_translates_anticipated_failures() -> None:
    url = "nats://127.0.0.1:4222"
    assert "did not answer in time" in (describe(nats.errors.TimeoutError(), nats_url=url) or "")
    assert "did not answer in time" in (describe(TimeoutError(), nats_url=url) or "")
    assert "is unreachable (NoRespondersError)" in (
        describe(nats.errors.NoRespondersError(), nats_url=url) or ""
    )
    assert "is unreachable (ConnectionClosedError)" in (
        describe(nats.errors.ConnectionClosedError(), nats_url=url) or ""
    )
    try:
        _Model.model_validate({"n": "x"})
    except ValidationError as exc:
        assert describe(exc) == "n: Input should be a valid integer, unable to parse string as an integer"
    assert describe(RuntimeError("bug")) is None
    assert describe(KeyError("bug")) is None
