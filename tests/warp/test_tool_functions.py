"""Warp's tools are module-level functions: imported and called alone, with a runtime, no MCP.

What the builder adds around them (strict arguments, coded errors, in-flight counting)
is tested through MCP sessions in tests/shared/mcp/test_strict_tools.py; here a tool is
just a coroutine over a real runtime on a real nats-server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from warp_harness import make_identity

from shared.errors import Conflict
from shared.nats.server import EmbeddedNatsServer
from warp.runtime import WarpRuntime
from warp.settings import WarpSettings
from warp.tools.channels import warp_channels_read, warp_channels_send
from warp.tools.registry import warp_registry_register
from warp.tools.work import warp_work_broadcast, warp_work_claim, warp_work_complete

A = "a" * 32


@pytest.fixture
async def rt(
    nats_server: EmbeddedNatsServer, project_id: str, project_dir: Path
) -> AsyncIterator[WarpRuntime]:
    runtime = WarpRuntime(
        make_identity(project_id, project_dir, A), WarpSettings(heartbeat_s=5.0), nats_url=nats_server.url
    )
    runtime.start()
    try:
        await runtime.services()
        yield runtime
    finally:
        await runtime.stop("test over")


def structured(res: types.CallToolResult) -> dict[str, Any]:
    assert not res.is_error and res.structured_content is not None
    return dict(res.structured_content)


async def test_a_channel_tool_called_alone(rt: WarpRuntime) -> None:
    sent = structured(await warp_channels_send(rt, channel="roadmap", message="called alone"))
    assert sent["channel"] == "roadmap" and sent["seq"] == 1 and sent["scope"] == "team"
    page = structured(await warp_channels_read(rt, channel="roadmap", from_beginning=True))
    assert [m["body"] for m in page["messages"]] == ["called alone"]
    assert page["messages"][0]["sender_id"] == A
    assert rt.inflight == 0  # in-flight counting is the builder's, not the tool's


async def test_the_work_tools_called_alone(rt: WarpRuntime) -> None:
    with pytest.raises(Conflict) as refused:  # the builder would make this a coded tool error
        await warp_work_claim(rt)
    assert refused.value.field == "registration"
    structured(await warp_registry_register(rt, capabilities=["code"]))
    offered = structured(await warp_work_broadcast(rt, description="alone", capability="code", priority=7))
    work_id = offered["item"]["id"]
    claim = structured(await warp_work_claim(rt))
    assert claim["claimed"] is True and claim["item"]["id"] == work_id
    assert claim["item"]["priority"] == 7 and claim["item"]["assigned_to"] == A
    done = structured(await warp_work_complete(rt, work_id=work_id, result={"ok": True}))
    assert done["item"]["status"] == "completed" and done["item"]["result"] == {"ok": True}
    assert rt.services_now().presence.held == set()
