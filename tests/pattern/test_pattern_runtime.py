"""The background runtime and mounting the tools on another MCPServer (as Warp does)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from nats.aio.client import Client as NatsClient
from pattern_helpers import make_identity

from pattern.config import PatternConfig
from pattern.errors import StorageError, UnavailableError
from pattern.inputs import ForgetInput, RecallInput, RememberInput
from pattern.runtime import PatternRuntime
from pattern.tools import TOOL_NAMES, pattern_tools
from shared.nats.failures import JETSTREAM_ERROR, NATS_UNAVAILABLE, nats_failure
from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port
from shared.settings import NatsSettings
from testsupport.natsfailures import FAILURES, SECRET


async def test_runtime_keeps_retrying_until_nats_appears(
    project_id: str, project_path: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    runtime = PatternRuntime(
        make_identity(project_id, project_path),
        PatternConfig(export_dir=tmp_path),
        nats_settings=NatsSettings(NATS_URL=url),
        connect_timeout=1,
    )
    runtime.start()
    try:
        with pytest.raises(UnavailableError) as err:
            runtime.get_service()
        assert url in str(err.value) and "retrying" in str(err.value)
        health = runtime.health()
        assert health.status in ("starting", "unavailable") and not health.connected
        assert health.identity is not None and health.identity.project_id == project_id
        with EmbeddedNatsServer(ServerConfig(port=port)):
            service = await runtime.wait_ready(30)
            assert runtime.get_service() is service
            await service.remember(RememberInput(content="arrived late"))
            assert runtime.health().status == "ok"
            await runtime.close()
    finally:
        await runtime.close()


async def test_tools_mount_on_a_host_server(
    nc: NatsClient, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    """Warp's ``--with-memory``: the host owns the server, the connection and the identity."""
    runtime = PatternRuntime(make_identity(project_id, project_path), PatternConfig(export_dir=tmp_path))
    tools = pattern_tools(runtime.get_service, health=runtime.health)
    assert [t.name for t in tools] == list(TOOL_NAMES)
    host: MCPServer[Any] = MCPServer("warp-like", tools=tools)

    @host.tool()
    def warp_handle_get() -> str:
        return "host tool"

    async with Client(host) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == {"warp_handle_get", *TOOL_NAMES}
        early = await client.call_tool("pattern_recall_context", {})
        assert early.is_error
        runtime.use_connection(nc)
        service = await runtime.wait_ready(30)
        res = await client.call_tool("pattern_remember", {"content": "through the host", "scope": "team"})
        assert not res.is_error and res.structured_content is not None
        memory_id = res.structured_content["memory"]["id"]
        got = await service.recall_context(RecallInput())
        assert [m.id for m in got.memories] == [memory_id]
        host_tool = await client.call_tool("warp_handle_get", {"anything": 1})
        assert not host_tool.is_error  # the strict-arguments rule applies to pattern tools only
    await runtime.close()
    assert nc.is_connected  # the borrowed connection stays open


async def test_a_call_made_while_memory_loads_waits_for_it(
    nc: NatsClient, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    """An agent host starts Pattern and calls it at once: the first call of a session waits
    for the service (bounded) instead of failing with "still loading"."""
    config = PatternConfig(export_dir=tmp_path, ready_wait_s=30)
    runtime = PatternRuntime(make_identity(project_id, project_path), config)
    tools = pattern_tools(runtime.get_service, health=runtime.health, until_ready=runtime.until_ready)
    async with Client(MCPServer("host", tools=tools)) as client:
        early = asyncio.create_task(client.call_tool("pattern_remember", {"content": "first thing"}))
        await asyncio.sleep(0.3)
        assert not early.done()  # waiting, not failed
        runtime.use_connection(nc)  # the service starts loading only now
        answered = await asyncio.wait_for(early, 30)
        assert not answered.is_error, answered.content
        health = await client.call_tool("pattern_health", {})
        assert health.structured_content is not None and health.structured_content["status"] == "ok"
    await runtime.close()

    # the wait is bounded: a service that never comes fails the call with the reason
    stuck = PatternRuntime(
        make_identity(project_id, project_path), PatternConfig(export_dir=tmp_path, ready_wait_s=0.2)
    )
    tools = pattern_tools(stuck.get_service, health=stuck.health, until_ready=stuck.until_ready)
    async with Client(MCPServer("host", tools=tools)) as client:
        refused = await asyncio.wait_for(client.call_tool("pattern_recall_context", {}), 10)
        assert refused.is_error and "try again shortly" in str(refused.content)
    await stuck.close()


async def test_mounted_health_shows_no_identity_until_the_host_settles_it(
    nc: NatsClient, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    """In Warp, the plain id may belong to another Warp of the folder until Warp has taken
    its instance id: health must not show it, and afterwards shows the settled one."""
    base = make_identity(project_id, project_path)
    settled = base.with_instance(1)  # what Warp takes when another Warp holds instance 0
    runtime = PatternRuntime(base, PatternConfig(export_dir=tmp_path), identity_settled=False)
    try:
        early = runtime.health()
        assert early.identity is None and early.status != "ok"
        assert base.agent_id not in early.model_dump_json() and base.agent_id not in early.text()
        runtime.use_connection(nc, settled)
        assert (settled_health := runtime.health()).identity is not None
        assert settled_health.identity.agent_id == settled.agent_id
        service = await runtime.wait_ready(30)
        assert service.agent_id == settled.agent_id
        assert runtime.health().identity == settled_health.identity
    finally:
        await runtime.close()


async def test_index_follows_again_after_nats_restart(
    project_id: str, project_path: Path, tmp_path: Path
) -> None:
    """nats-server restarts (data kept): the ephemeral consumers are gone; the index must catch up."""
    from pattern_helpers import eventually

    from pattern.service import MemoryService
    from shared.nats.client import connect

    port, store = free_port(), tmp_path / "js"
    server = EmbeddedNatsServer(ServerConfig(port=port, store_dir=store)).start()
    writer_nc = await connect(url=server.url, mode="service")
    reader_nc = await connect(url=server.url, mode="service")
    config = PatternConfig(export_dir=tmp_path)
    writer = MemoryService(writer_nc, make_identity(project_id, project_path), config)
    reader = MemoryService(reader_nc, make_identity(project_id, project_path), config)
    try:
        await writer.start()
        await reader.start()
        before = (await writer.remember(RememberInput(content="before", scope="team"))).memory
        await eventually(lambda: reader.index.get(before.id))
        server.stop()
        server = EmbeddedNatsServer(ServerConfig(port=port, store_dir=store)).start()
        await eventually(lambda: writer_nc.is_connected and reader_nc.is_connected, timeout=30)
        written: list[str] = []

        async def write_after() -> bool:
            # JetStream may still be recovering its streams right after the restart.
            try:
                written.append(
                    (await writer.remember(RememberInput(content="after", scope="team"))).memory.id
                )
            except UnavailableError:
                return False
            return True

        await eventually(write_after, timeout=60)
        after_id = written[0]
        await eventually(lambda: reader.index.get(after_id), timeout=30)
        await writer.forget(ForgetInput(memory_id=before.id))
        await eventually(lambda: not reader.index.get(before.id), timeout=30)
    finally:
        await writer.close()
        await reader.close()
        await writer_nc.close()
        await reader_nc.close()
        server.stop()


async def test_nats_failures_are_nats_error_of_the_kind_every_part_gives(
    nc: NatsClient,
    project_id: str,
    project_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stale connection is "unavailable" (``NATS_ERROR``, an :class:`UnavailableError`), as
    in Warp and Weft: Pattern maps what shared.nats.failures says onto its TypeScript code."""
    runtime = PatternRuntime(make_identity(project_id, project_path), PatternConfig(export_dir=tmp_path))
    host: MCPServer[Any] = MCPServer(
        "pattern-host", tools=pattern_tools(runtime.get_service, health=runtime.health)
    )
    runtime.use_connection(nc)
    service = await runtime.wait_ready(30)
    failure: list[BaseException] = []

    async def failing(*_: object, **__: object) -> None:
        raise failure[0]

    monkeypatch.setattr(service, "_put", failing)
    kinds: dict[str, str] = {}
    async with Client(host) as client:
        for name, (make, _) in FAILURES.items():
            failure[:] = [make()]
            res = await client.call_tool("pattern_remember", {"content": "lost", "scope": "team"})
            assert res.is_error, name
            envelope = (res.meta or {})["loom/error"]
            assert envelope["error"] == "NATS_ERROR", name
            shown = " ".join(getattr(c, "text", "") for c in res.content)
            assert envelope["message"] == shown and SECRET not in shown
            assert " while storing the memory" in shown, shown
            found = nats_failure(failure[0], doing="storing the memory")
            assert found is not None and shown == found.message  # mapped, not classified again
            failure[:] = [make()]
            with pytest.raises((UnavailableError, StorageError)) as raised:
                await service.remember(RememberInput(content="lost"))
            kinds[name] = NATS_UNAVAILABLE if isinstance(raised.value, UnavailableError) else JETSTREAM_ERROR
            if name == "stale-connection":
                assert shown == "NATS is unreachable while storing the memory (StaleConnectionError)"
    await runtime.close()
    assert kinds == {name: code for name, (_, code) in FAILURES.items()}
