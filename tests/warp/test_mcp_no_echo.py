"""Rejected input is never echoed back by a Warp tool (issue 21, defect 2).

For every argument of every tool (from ``tools/list``, so a new tool or argument is
covered without editing this file) a spawned Warp gets a secret-looking value over a
real MCP session; every refusal must name the argument without repeating the value,
and the value must never reach Warp's log.
"""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
from warp_harness import spawn_warp

from testsupport.servers import secret_inputs

SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="
"""Looks like a credential and breaks every name, id, tag, path and enum rule ('+', '=')."""


def _text(res: types.CallToolResult) -> str:
    return " ".join(c.text for c in res.content if isinstance(c, types.TextContent))


async def test_no_tool_repeats_a_rejected_argument(warp_env: dict[str, str], tmp_path: Path) -> None:
    env = {**warp_env, "LOOM_HANDLE": "tester", "LOOM_CAPABILITIES": "code"}
    async with spawn_warp(env, tmp_path) as w:
        await w.ready_ok("warp_registry_register", {"capabilities": ["code"]})
        listed = await w.session.list_tools()
        refused = free = 0
        for tool in listed.tools:
            schema = tool.input_schema
            cases = secret_inputs(schema, schema, SECRET)
            for name, bad, free_text in cases:
                res = await w.call(tool.name, {name: bad})
                text = _text(res)
                if free_text:  # any text is valid there; refused only for a missing argument, if at all
                    free += 1
                    assert not res.is_error or SECRET not in text, (tool.name, name, text)
                    continue
                assert res.is_error, (tool.name, name, text)
                assert SECRET not in text, (tool.name, name, text)
                assert name in text, (tool.name, name, text)
                refused += 1
            unknown = await w.call(tool.name, {SECRET: 1, "colour": 2})
            assert unknown.is_error and SECRET not in _text(unknown) and "colour" in _text(unknown)
        assert refused > 40 and free > 5
        stderr = w.stderr()
    assert "loom.warp" in stderr  # the log was written, and it is where we look
    assert SECRET not in stderr
