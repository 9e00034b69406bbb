"""Warp configured and called the TypeScript Warp's way: read with that meaning, or refused
naming ours (docs/migrating.md); every refusal carries a code (docs/architecture.md, Error codes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from warp_harness import WARP, make_identity, spawn_warp

from shared.nats.server import EmbeddedNatsServer
from testsupport.mcp import unknown_tool
from warp.runtime import WarpRuntime
from warp.server import build_server
from warp.settings import WarpSettings

A = "a" * 32
SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="
ROOT = Path(__file__).resolve().parents[2]
TS_SDK = (
    ROOT / "test-scenarios" / "performance" / "ts-client" / "node_modules" / "@modelcontextprotocol" / "sdk"
)


def start_fails(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [WARP, *args], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.startswith("warp: ")
    return done.stderr


def test_settings_that_cannot_be_honoured_stop_start_up(warp_env: dict[str, str]) -> None:
    line = start_fails({**warp_env, "WORKQUEUE_MAX_ATTEMPTS": "5"})
    assert "WORKQUEUE_MAX_ATTEMPTS" in line and "max_attempts" in line
    line = start_fails({**warp_env, "LOG_LEVEL": "WARN"})  # warp_env sets LOOM_LOG_LEVEL=INFO
    assert "LOG_LEVEL and LOOM_LOG_LEVEL are all set and disagree" in line
    line = start_fails({**warp_env, "LOOMINAL_SUBAGENT_TYPE": "explore", "LOOM_SUBAGENT_TYPE": "plan"})
    assert "LOOMINAL_SUBAGENT_TYPE and LOOM_SUBAGENT_TYPE" in line and "explore" not in line
    line = start_fails({**warp_env, "LOOMINAL_SUBAGENT_TYPE": SECRET})
    assert "LOOMINAL_SUBAGENT_TYPE (alias of LOOM_SUBAGENT_TYPE)" in line and SECRET not in line
    # Pattern's variables count only when Warp serves Pattern's tools
    line = start_fails({**warp_env, "PATTERN_ENCRYPTION_KEY": SECRET}, "--with-memory")
    assert "PATTERN_ENCRYPTION_KEY" in line and SECRET not in line


def test_the_original_warps_config_file_stops_start_up(warp_env: dict[str, str]) -> None:
    project = Path(warp_env["LOOM_PROJECT_PATH"])
    legacy = project / ".loominal-config.json"
    legacy.write_text(json.dumps({"namespace": "old", "channels": [{"name": "deploys", "description": "d"}]}))
    line = start_fails(warp_env)
    assert str(legacy) in line and ".loom/config.json" in line and "max_age_s" in line


async def test_a_subagent_set_up_the_original_way_is_one(warp_env: dict[str, str], tmp_path: Path) -> None:
    env = {k: v for k, v in warp_env.items() if k not in ("LOOM_PROJECT_ID", "LOOM_LOG_LEVEL")}
    env.update(
        LOOMINAL_PROJECT_ID=warp_env["LOOM_PROJECT_ID"],
        LOOMINAL_AGENT_ID=A,
        LOOMINAL_SUBAGENT_TYPE="explore",
        LOG_LEVEL="warn",
    )
    async with spawn_warp(env, tmp_path) as w:
        entry = await w.ready_ok("warp_registry_register", {"capabilities": ["code"]})
        assert entry["parent_id"] == A and entry["agent_id"] not in (A, None)
        assert entry["project_id"] == warp_env["LOOM_PROJECT_ID"]
        stderr = w.stderr()
    assert "LOG_LEVEL (a setting of the TypeScript Warp) is translated to LOOM_LOG_LEVEL" in stderr
    assert " INFO " not in stderr  # WARN was read as the log level


@asynccontextmanager
async def session(url: str, project_id: str, project_dir: Path) -> AsyncIterator[Client]:
    rt = WarpRuntime(
        make_identity(project_id, project_dir, A), WarpSettings(capabilities=("code",)), nats_url=url
    )
    async with Client(build_server(rt)) as client:
        await rt.services()
        yield client


async def refused(client: Client, tool: str, args: dict[str, Any]) -> tuple[str, str, Any]:
    res: types.CallToolResult = await client.call_tool(tool, args)
    text = " ".join(c.text for c in res.content if isinstance(c, types.TextContent))
    assert res.is_error, text
    assert res.structured_content is None  # strict TypeScript SDK clients check it against the success schema
    body = (res.meta or {}).get("loom/error")
    assert isinstance(body, dict) and set(body) == {"error", "message", "details"}, body
    assert body["message"] == text
    return body["error"], body["message"], body["details"]


async def test_the_originals_arguments_and_tools_are_answered_with_ours(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with session(nats_server.url, project_id, tmp_path) as client:
        code, message, _ = await refused(client, "warp_registry_register", {"agentType": "developer"})
        assert code == "validation_error"
        assert "agentType: this is the TypeScript Warp's name; use agent_type" in message
        code, message, _ = await refused(
            client, "warp_work_broadcast", {"taskId": "t", "description": "d", "requiredCapability": "code"}
        )
        assert "use task_id" in message and "use capability" in message
        code, message, _ = await refused(client, "warp_dlq_retry", {"itemId": "x", "resetAttempts": True})
        assert "use work_id" in message and "always starts again" in message
        code, message, _ = await refused(
            client, "warp_registry_discover", {"includeOffline": True, "colour": 1}
        )
        assert "use status" in message and "colour: unknown field" in message
        code, message, _ = await refused(client, "warp_channels_read", {"channel": "roadmap", SECRET: 1})
        assert code == "validation_error" and SECRET not in message
        for old, new in (("register_agent", "warp_registry_register"), ("claim_work", "warp_work_claim")):
            code, message = await unknown_tool(client, old, {})
            assert code == "unknown_tool" and f"use {new}" in message
        # Pattern is not mounted here
        code, message = await unknown_tool(client, "remember", {"content": "x"})
        assert "use pattern_remember" in message and "--with-memory" in message


async def test_the_original_warps_keys_in_our_config_file_are_refused(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    (tmp_path / ".loom").mkdir()
    (tmp_path / ".loom" / "config.json").write_text(json.dumps({"namespace": "old", "channels": {}}))
    async with session(nats_server.url, project_id, tmp_path) as client:
        code, message, _ = await refused(client, "warp_channels_list", {})
        assert "namespace: this is the TypeScript Warp's setting; use LOOM_PROJECT_ID" in message
        assert code == "invalid"


async def test_refusals_carry_codes(nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path) -> None:
    async with session(nats_server.url, project_id, tmp_path) as client:
        code, _, details = await refused(client, "warp_handle_set", {"handle": "Bad Handle"})
        assert code == "validation_error" and details is None
        code, _, details = await refused(client, "warp_registry_get_info", {})
        assert code == "not_found" and details == {"field": "agent_id"}
        code, _, details = await refused(client, "warp_work_complete", {"work_id": "0" * 32})
        assert code == "not_found" and details["field"] == "work_id"
        code, _, _ = await refused(client, "warp_messages_read_direct", {"cursor": "!!!"})
        assert code == "invalid_cursor"
        code, message, details = await refused(client, "warp_channels_status", {"channel": "nope"})
        assert code == "not_found" and details["field"] == "channel", message
        with pytest.raises(MCPError) as no_prompt:  # not the SDK's code 0
            await client.get_prompt("no_such_prompt")
        assert no_prompt.value.error.code == INVALID_PARAMS
        assert no_prompt.value.error.data["error"] == "unknown_prompt"
        assert "no_such_prompt" in no_prompt.value.error.message


def test_a_typescript_sdk_client_gets_the_refusal_and_its_code(warp_env: dict[str, str]) -> None:
    """The TypeScript SDK's client checks structured content against a tool's output schema even
    on an error result, so the code travels in _meta: the refusal must reach it, not a -32602
    (which only an unknown tool is, as MCP specifies)."""
    node = shutil.which("node")
    if node is None or not TS_SDK.is_dir():
        pytest.skip("Node or the TypeScript SDK (make install with Node) is not here")
    pattern = str(Path(sys.executable).parent / "pattern")
    dead = {**warp_env, "NATS_URL": "nats://127.0.0.1:1", "LOOM_WARP_READY_WAIT_S": "0"}
    calls = {
        WARP: [
            {"name": "warp_handle_set", "arguments": {"handle": "Bad Handle"}},
            {"name": "warp_registry_register", "arguments": {"agentType": "x"}},
            {"name": "warp_work_claim", "arguments": {}},
            {"name": "register_agent", "arguments": {}},
        ],
        pattern: [
            {"name": "pattern_forget", "arguments": {"memoryId": "x"}},
            {"name": "pattern_forget", "arguments": {"memory_id": "0" * 32}},
        ],
    }
    codes = {
        WARP: ["validation_error", "validation_error", "unavailable", "unknown_tool"],
        pattern: ["VALIDATION_ERROR", "NATS_ERROR"],
    }
    for command, script in calls.items():
        done = subprocess.run(
            [
                node,
                str(Path(__file__).with_name("ts_tool_errors.mjs")),
                str(TS_SDK),
                command,
                json.dumps({"PATH": dead.get("PATH", "/usr/bin:/bin"), **dead}),
                json.dumps(script),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        results = [a for a in answers if "thrown" not in a]
        assert all(a["isError"] for a in results), answers
        assert all(a["meta"]["loom/error"]["message"] == a["text"] for a in results)
        # an unknown tool is a protocol error (-32602) carrying the envelope as its data
        thrown = [a for a in answers if "thrown" in a]
        assert all(a["code"] == -32602 and a["data"]["error"] == "unknown_tool" for a in thrown), answers
        got = [a["meta"]["loom/error"]["error"] if "thrown" not in a else a["data"]["error"] for a in answers]
        assert got == codes[command], answers
