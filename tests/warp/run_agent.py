"""A scripted agent CLI for ``loom-run``'s tests: it does what an agent host does with
Loom (start ``warp`` over MCP stdio in its own working directory, with its environment),
writes a file before and after claiming, completes, and prints what it saw as one JSON
line on stdout."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

WARP = str(Path(sys.executable).parent / "warp")


async def main(errlog: TextIO) -> None:
    here = Path.cwd()
    (here / "early.txt").write_text("written before the claim\n")
    params = StdioServerParameters(command=WARP, env=dict(os.environ), cwd=str(here))
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        claimed = await session.call_tool("warp_work_claim", {})
        assert not claimed.is_error, claimed.content
        found = dict(claimed.structured_content or {})
        (here / "late.txt").write_text("written after the claim\n")
        work_id = found["item"]["id"]
        done = await session.call_tool("warp_work_complete", {"work_id": work_id, "result": "ok"})
        assert not done.is_error, done.content
    seen = {
        "cwd": str(here),
        "workstream": found.get("workstream"),
        "worktree_env": os.environ.get("LOOM_WORKTREE"),
    }
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    with open(os.environ["RUN_AGENT_ERRLOG"], "w") as log:
        asyncio.run(main(log))
