"""NATS goes away during a session and comes back: clear errors meanwhile, nothing lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from warp_harness import eventually, spawn_warp

from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port

A_ID = "a" * 32
B_ID = "b" * 32


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[ServerConfig]:
    """A fixed port and data directory, so a restarted server is the same server."""
    config = ServerConfig(port=free_port(), store_dir=tmp_path / "jetstream")
    yield config


async def test_tools_fail_clearly_while_nats_is_down_and_recover(
    restartable: ServerConfig, warp_env: dict[str, str], tmp_path: Path
) -> None:
    server = EmbeddedNatsServer(restartable).start()
    url = server.url
    env = {
        **warp_env,
        "NATS_URL": url,
        "LOOM_AGENT_ID": A_ID,
        "LOOM_CAPABILITIES": "code",
        "LOOM_AUTO_REGISTER": "1",
    }
    try:
        async with spawn_warp(env, tmp_path, name="a") as a:
            await a.ready_ok("warp_channels_send", {"channel": "roadmap", "message": "before"})
            await a.ok("warp_messages_send_direct", {"recipient_id": A_ID, "message": "note before"})
            item = (await a.ok("warp_work_broadcast", {"description": "survive", "capability": "code"}))[
                "item"
            ]

            server.stop()
            down = await a.err("warp_channels_send", {"channel": "roadmap", "message": "during"})
            assert "NATS" in down and ("unreachable" in down or "did not answer" in down), down
            assert "retry" in down or "try again" in down
            assert "NATS" in await a.err("warp_messages_read_direct")
            assert "NATS" in await a.err("warp_work_claim")

            # A Warp started while NATS is down answers the handshake and explains itself.
            async with spawn_warp({**env, "LOOM_AGENT_ID": B_ID}, tmp_path, name="b") as b:
                early = await b.err("warp_channels_list")
                assert "NATS is not reachable yet" in early

                server = EmbeddedNatsServer(restartable).start()

                async def back() -> bool:
                    res = await a.call("warp_channels_send", {"channel": "roadmap", "message": "after"})
                    return not res.is_error

                await eventually(back, timeout=60)
                late = await b.ready_ok("warp_channels_read", {"channel": "roadmap", "from_beginning": True})
                assert [m["body"] for m in late["messages"]] == ["before", "after"]

            inbox = await a.ok("warp_messages_read_direct")
            assert [m["body"] for m in inbox["messages"]] == ["note before"]
            claimed = await a.ok("warp_work_claim")
            assert claimed["item"]["id"] == item["id"]
            await a.ok("warp_work_complete", {"work_id": item["id"]})
            me = await a.ok("warp_registry_get_info")
            assert me["status"] == "online"
    finally:
        server.stop()
