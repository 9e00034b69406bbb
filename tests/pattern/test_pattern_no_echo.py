"""Rejected input is never echoed back by a Pattern tool (issue 21, defect 2).

For every argument of every tool (from ``tools/list``) a spawned Pattern gets a
secret-looking value over a real MCP session: every refusal names the argument
without repeating the value, and the value never reaches Pattern's log.
"""

from __future__ import annotations

from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult
from pattern_helpers import eventually, new_agent_id, new_user_id

from shared.nats.server import EmbeddedNatsServer
from testsupport.servers import secret_inputs
from testsupport.zygote import zygote_env

PATTERN = str(Path(__import__("sys").executable).parent / "pattern")
SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="
"""Looks like a credential and breaks every name, id, tag, path and enum rule ('+', '=')."""


def _text(res: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in res.content)


async def test_no_tool_repeats_a_rejected_argument(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    env = {
        "NATS_URL": nats_server.url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(project_path),
        "LOOM_AGENT_ID": new_agent_id(),
        "LOOM_USER_ID": new_user_id(),
        "PATTERN_EXPORT_DIR": str(project_path / "exports"),
        **zygote_env(),  # forked from the suite's zygote (testsupport/zygote.py)
    }
    log_path = project_path / "stderr.log"
    params = StdioServerParameters(command=PATTERN, args=["--log-level", "DEBUG"], env=env, cwd=project_path)
    with log_path.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()

            async def ready() -> bool:
                res = await s.call_tool("pattern_health", {})
                return bool(res.structured_content and res.structured_content["status"] == "ok")

            await eventually(ready, timeout=20)
            refused = free = 0
            for tool in (await s.list_tools()).tools:
                schema = tool.input_schema
                for name, bad, free_text in secret_inputs(schema, schema, SECRET):
                    res = await s.call_tool(tool.name, {name: bad})
                    text = _text(res)
                    if free_text:  # any text is valid there (content, search)
                        free += 1
                        assert not res.is_error or SECRET not in text, (tool.name, name, text)
                        continue
                    assert res.is_error, (tool.name, name, text)
                    assert SECRET not in text and name in text, (tool.name, name, text)
                    refused += 1
                unknown = await s.call_tool(tool.name, {SECRET: 1, "colour": 2})
                assert unknown.is_error and SECRET not in _text(unknown) and "colour" in _text(unknown)
            missing = await s.call_tool("pattern_forget", {"memory_id": "a" * 32})
            assert (
                missing.is_error
                and "a" * 32 not in _text(missing)
                and "memory_id: no memory" in _text(missing)
            )
            assert refused > 30 and free >= 2
    log = log_path.read_text()
    assert "loom.pattern" in log  # the log was written, and it is where we look
    assert SECRET not in log
