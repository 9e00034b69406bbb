"""Synadia's Agent Protocol (docs/interop.md): a prompt answered by a Loom agent, against the
protocol's own agent-host package answering the same prompt by itself.

* prompt -> answer through a Loom agent: a caller (``synadia-ai-agents``) prompts a real Warp
  process; the prompt becomes a direct message; the agent, driven over MCP stdio by a bare
  JSON-RPC client that reads its inbox as soon as the prompt is sent, answers it with
  ``warp_messages_send_direct`` and ``reply_to``; timed until the caller has the answer and
  the stream's end. The agent's two tool calls are in it: that is what an agent does.
* baseline: the same caller prompting an echo service of ``synadia-ai-agent-service`` on
  the same nats-server (the protocol's own ack, chunk and terminator, no agent in between).
* discovery: ``Agents.discover`` finding that agent among what answers on the account.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from bench_warp import RawRpc, warp_env
from benchlib import BenchContext, BenchResult, summarize, time_async

AGENT_ID = "c3" * 16
RAW = "raw: the protocol's own echo service, prompt -> answer"


async def _answer_next(agent: RawRpc) -> None:
    """Read the inbox until the prompt is there, then answer it."""
    while True:
        page = await agent.tool("warp_messages_read_direct", {"message_type": "prompt", "limit": 1})
        if page["messages"]:
            prompt = page["messages"][0]
            await agent.tool(
                "warp_messages_send_direct",
                {"recipient_id": prompt["sender_id"], "reply_to": prompt["id"], "message": prompt["body"]},
            )
            return


async def run(ctx: BenchContext) -> list[BenchResult]:
    from synadia_ai.agent_service import AgentService, PromptStream
    from synadia_ai.agents import Agents, DiscoverFilter, Envelope, ResponseChunk

    from shared.nats.client import connect

    n = ctx.iterations(200, quick=10)
    project = f"bench-interop-{uuid.uuid4().hex[:8]}"
    nc = await connect(url=ctx.nats_url, name="bench-interop")
    errlog = (ctx.scratch / "warp-interop.stderr").open("w")
    agent = await RawRpc.start(warp_env(ctx, project, AGENT_ID, "interop"), errlog)
    callers = Agents(nc=nc)

    async def echo(envelope: Envelope, stream: PromptStream) -> None:
        await stream.send(envelope.prompt)

    own = AgentService(agent="bench", owner=project, session_name="echo", nc=nc)
    own.on_prompt(echo)
    await own.start()
    results: list[BenchResult] = []
    try:
        for _ in range(200):  # registered: the service starts once Warp has connected
            got = await callers.discover(filter=DiscoverFilter(owner=project, session_name=AGENT_ID))
            if got:
                break
        else:
            raise RuntimeError("the Warp agent never served the protocol")
        loom = got[0]
        [echoing] = await callers.discover(filter=DiscoverFilter(owner=project, session_name="echo"))

        async def ask(target: Any) -> None:
            stream = target.prompt("bench", timeout=30)
            chunks = [m.text async for m in stream if isinstance(m, ResponseChunk)]
            assert chunks == ["bench"], chunks

        async def raw_round() -> None:
            await ask(echoing)

        async def loom_round() -> None:
            await asyncio.gather(ask(loom), _answer_next(agent))

        raw = summarize(RAW, await time_async(raw_round, n))
        results.append(raw)
        results.append(
            summarize(
                "interop: prompt -> answer through a Loom agent's inbox (raw JSON-RPC agent)",
                await time_async(loom_round, n),
                baseline=RAW,
            )
        )
        found: list[float] = []
        for _ in range(ctx.iterations(10, quick=3)):
            start = time.perf_counter()
            await callers.discover(filter=DiscoverFilter(owner=project, session_name=AGENT_ID))
            found.append((time.perf_counter() - start) * 1000)
        results.append(
            summarize(
                "interop: discovery of the agents on the account (the protocol's stall strategy)", found
            )
        )
    finally:
        await callers.close()
        await own.stop()
        await agent.close()
        errlog.close()
        await nc.close()
    return results
