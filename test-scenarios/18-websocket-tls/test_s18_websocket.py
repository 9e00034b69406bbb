"""Scenario 18: an agent on WebSocket over TLS (wss://) works alongside agents on TCP+TLS.

One nats-server serves TLS on its client port and TLS WebSocket. Two agents connect
over tls://, one over wss:// (all trusting the test CA through NATS_TLS_CA), and a Weft
on the same server takes work from Shuttle. The WebSocket agent registers, talks on a
channel, exchanges direct messages and claims work like the others. An agent that does
not trust the CA gets a clear NATS error instead.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

from scenario_harness import Connection, Fabric, agents_in, eventually

from shared.settings import NatsSettings
from testsupport.servers import TlsServer


async def test_wss_agent_works_with_tcp_agents(
    fabric: Fabric, nats_tls_server: TlsServer, weft_factory: Any
) -> None:
    tcp = Connection(nats_tls_server.url, tls_ca=nats_tls_server.ca_file)
    wss = Connection(nats_tls_server.websocket_url, tls_ca=nats_tls_server.ca_file)
    assert tcp.url.startswith("tls://") and wss.url.startswith("wss://")

    nats = NatsSettings(url=nats_tls_server.url, tls_ca=nats_tls_server.ca_file)
    with weft_factory(nats=nats) as weft:
        over_tcp = fabric.served_by(weft).via(tcp)
        over_wss = over_tcp.via(wss)
        items = [
            (await over_tcp.shuttle_json("submit", f"job {n}", "--capability", "build"))["id"]
            for n in range(4)
        ]

        async with AsyncExitStack() as stack:
            agents = await agents_in(
                stack,
                over_tcp,
                {
                    "tcp-one": {"capabilities": ["build"]},
                    "tcp-two": {"capabilities": ["build"]},
                    "web-one": {"fabric": over_wss, "capabilities": ["build"]},
                },
            )
            t1, t2, ws = agents["tcp-one"], agents["tcp-two"], agents["web-one"]

            # Everyone sees everyone, whatever the transport.
            seen = {a["handle"] for a in (await t1.call("warp_registry_discover"))["agents"]}
            assert seen == {"tcp-one", "tcp-two", "web-one"}
            seen = {a["handle"] for a in (await ws.call("warp_registry_discover"))["agents"]}
            assert seen == {"tcp-one", "tcp-two", "web-one"}

            # Channel both ways.
            await ws.call("warp_channels_send", channel="parallel-work", message="web-one: taking the builds")
            await t1.call("warp_channels_send", channel="parallel-work", message="tcp-one: me too")
            for agent in (t2, ws):
                page = await agent.call("warp_channels_read", channel="parallel-work", from_beginning=True)
                assert [m["sender_handle"] for m in page["messages"]] == ["web-one", "tcp-one"]

            # Direct messages both ways.
            await ws.call("warp_messages_send_direct", recipient_id=t2.agent_id, message="over wss")
            await t2.call("warp_messages_send_direct", recipient_id=ws.agent_id, message="over tls")
            assert [m["body"] for m in (await t2.call("warp_messages_read_direct"))["messages"]] == [
                "over wss"
            ]
            assert [m["body"] for m in (await ws.call("warp_messages_read_direct"))["messages"]] == [
                "over tls"
            ]

            # Work: the three compete for 4 items; each is done once.
            async def work(agent: Any) -> list[str]:
                done = []
                while (item := await agent.claim()) is not None:
                    await agent.call("warp_work_complete", work_id=item["id"], result={"by": agent.handle})
                    done.append(item["id"])
                return done

            first = await ws.claim()  # the WebSocket agent certainly gets one
            assert first is not None
            await ws.call("warp_work_complete", work_id=first["id"], result={"by": ws.handle})
            rest = await asyncio.gather(work(t1), work(t2), work(ws))
            assert sorted([first["id"], *(i for r in rest for i in r)]) == sorted(items)

            async with over_tcp.api() as api:

                async def all_done() -> list[dict[str, Any]] | None:
                    listed: list[dict[str, Any]] = (
                        await api.get("/api/work", params={"status": "completed"})
                    ).json()["items"]
                    return listed if len(listed) == len(items) else None

                done = await eventually(all_done, what="Weft to show every item completed")
                assert {w["id"]: w["result"]["by"] for w in done}[first["id"]] == "web-one"
                agents = (await api.get("/api/agents")).json()["items"]
                assert {a["handle"] for a in agents} == {"tcp-one", "tcp-two", "web-one"}

        # Without the CA, a wss:// agent cannot connect, and says so in a tool error.
        untrusted = over_tcp.via(Connection(nats_tls_server.websocket_url))
        async with untrusted.agent("stranger", wait_ready=False) as stranger:
            error = await stranger.error("warp_registry_register")
            assert (
                "NATS" in error and "TLS handshake failed" in error and "certificate verify failed" in error
            )
