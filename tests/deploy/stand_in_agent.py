"""A stand-in agent for runner tests that do not need Warp: it reads the MCP
config the runner wrote (exactly what an agent CLI would hand to Warp) and
drives the work queue directly.

Usage: stand_in_agent.py <mcp_config> <mode> where mode is one of
complete, fail-exit (claim, exit 1), forget (claim, exit 0), exit-1 (no claim).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from shared.context.store import ContextStore
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.settings import NatsSettings
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant


async def work(env: dict[str, Any], mode: str) -> int:
    nc = await connect(NatsSettings.model_validate({k: v for k, v in env.items() if k.startswith("NATS_")}))
    try:
        names, js = ProjectNames(env["LOOM_PROJECT_ID"]), nc.jetstream()
        queue = WorkQueue(  # wired as Warp wires it (this process has no testsupport on its path)
            nc,
            names,
            js=js,
            contexts=ContextStore(nc, names, js=js),
            traces=TraceLog(nc, names),
            ledger=UsageLedger(js, names),
        )
        claimant = Claimant(
            agent_id=env["LOOM_AGENT_ID"],
            agent_type=env["LOOM_AGENT_TYPE"],
            capabilities=tuple(env["LOOM_CAPABILITIES"].split(",")),
        )
        item = await queue.claim(claimant)
        assert item is not None and item.id == os.environ["LOOM_WORK_ID"], item
        if mode == "complete":
            await queue.complete(item.id, claimant.agent_id, {"summary": "done by the stand-in"})
            return 0
        return 1 if mode == "fail-exit" else 0
    finally:
        await nc.close()


def main(config_path: str, mode: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        env = json.load(handle)["mcpServers"]["warp"]["env"]
    # The agent CLI itself must not see NATS credentials.
    assert not [k for k in os.environ if k.startswith("NATS_")], "NATS_* leaked into the agent's env"
    if mode == "exit-1":
        return 1
    return asyncio.run(work(env, mode))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
