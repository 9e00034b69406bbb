"""A scripted stand-in for an agent CLI: an MCP client that starts Warp exactly
as the runner's MCP config says, claims one work item, reports progress and
completes it (or fails it with ``--fail``). For smoke tests of a deployment:

    AGENT_COMMAND="python -m deploy.runner.scripted_agent {mcp_config}"

Exit codes: 0 an item was finished as asked; 3 nothing was eligible to claim;
1 anything else (a tool error, Warp not starting).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

REGISTER_WAIT_S = 30.0
EXIT_NOTHING = 3


class ToolFailed(RuntimeError):
    pass


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    if result.is_error:
        raise ToolFailed(f"{tool}: {_text(result)}")
    return dict(result.structured_content or {})


async def claim(session: ClientSession) -> dict[str, Any]:
    """warp_work_claim, waiting while Warp is still connecting or auto-registering."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REGISTER_WAIT_S
    while True:
        try:
            return await call(session, "warp_work_claim", {})
        except ToolFailed as exc:
            retry = "register first" in str(exc) or "not ready" in str(exc).lower()
            if not retry or loop.time() >= deadline:
                raise
        await asyncio.sleep(0.2)


async def run(server: dict[str, Any], fail: bool) -> int:
    params = StdioServerParameters(
        command=server["command"], args=server.get("args", []), env=server.get("env")
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        claimed = await claim(session)
        if not claimed.get("claimed"):
            print(f"scripted agent: nothing claimed ({claimed.get('reason')})", file=sys.stderr)
            return EXIT_NOTHING
        work_id = claimed["item"]["id"]
        await call(session, "warp_work_progress", {"work_id": work_id, "percent": 50, "note": "half way"})
        if fail:
            await call(session, "warp_work_fail", {"work_id": work_id, "error": "scripted failure"})
        else:
            result = {"by": "scripted-agent", "work_id": work_id}
            await call(session, "warp_work_complete", {"work_id": work_id, "result": result})
        await call(session, "warp_registry_deregister", {})
        print(f"scripted agent: {'failed' if fail else 'completed'} {work_id}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.runner.scripted_agent")
    parser.add_argument("mcp_config", type=Path, help="the MCP config the runner wrote ({mcp_config})")
    parser.add_argument("--fail", action="store_true", help="fail the claimed item instead of completing it")
    args = parser.parse_args(argv)
    try:
        server = json.loads(args.mcp_config.read_text(encoding="utf-8"))["mcpServers"]["warp"]
        return asyncio.run(run(server, args.fail))
    except (ToolFailed, OSError, KeyError, ValueError) as exc:
        print(f"scripted agent: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
