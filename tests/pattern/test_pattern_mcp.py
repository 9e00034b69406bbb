"""Pattern through real MCP sessions: ``.venv/bin/pattern`` spawned over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult
from pattern_helpers import eventually, new_agent_id, new_user_id

from pattern.tools import TOOLS
from pattern.zygote import ZYGOTE_ENV as PATTERN_ZYGOTE_ENV
from shared.identity import subagent_id
from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port
from testsupport.env import without_fabric
from testsupport.processes import children, maps_package
from testsupport.zygote import zygote_env

PATTERN = str(Path(sys.executable).parent / "pattern")


def base_env(nats_url: str, project_id: str, project_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "NATS_URL": nats_url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(project_path),
        "LOOM_AGENT_ID": new_agent_id(),
        "LOOM_USER_ID": new_user_id(),
        "PATTERN_EXPORT_DIR": str(project_path / "exports"),
    }
    env.update(extra)
    return env


@asynccontextmanager
async def pattern_session(
    env: dict[str, str], *, wait_ready: bool = True, forked: bool = True
) -> AsyncIterator[ClientSession]:
    """A session with a ``pattern`` started with ``env``: forked from the suite's zygote
    (testsupport/zygote.py) unless ``forked`` is False (a test of Pattern's own process)."""
    env = {**zygote_env(), **env} if forked else env
    params = StdioServerParameters(command=PATTERN, env=env, cwd=env.get("LOOM_PROJECT_PATH"))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        if wait_ready:

            async def ready() -> bool:
                res = await session.call_tool("pattern_health", {})
                return bool(res.structured_content and res.structured_content["status"] == "ok")

            await eventually(ready, timeout=20)
        yield session


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    res = await session.call_tool(tool, args)
    assert not res.is_error, text_of(res)
    assert res.structured_content is not None
    return res.structured_content


def text_of(res: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in res.content)


async def recall_ids(session: ClientSession, **args: Any) -> set[str]:
    got = await call(session, "pattern_recall_context", args)
    return {m["id"] for m in got["memories"]}


@pytest.fixture
def project_path(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


async def test_tools_list_matches_the_models(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    async with pattern_session(base_env(nats_server.url, project_id, project_path)) as s:
        listed = {t.name: t for t in (await s.list_tools()).tools}
    assert sorted(listed) == sorted(spec.name for spec in TOOLS)
    assert len(listed) == 18
    for spec in TOOLS:
        tool = listed[spec.name]
        assert spec.model is not None, spec.name
        schema = spec.model.model_json_schema()
        props = tool.input_schema.get("properties", {})
        assert set(props) == set(schema.get("properties", {})), spec.name
        assert set(tool.input_schema.get("required", [])) == set(schema.get("required", [])), spec.name
        assert tool.input_schema.get("additionalProperties") is False, spec.name
        for name, expected in schema.get("properties", {}).items():
            for key in (
                "maxLength",
                "minLength",
                "pattern",
                "minimum",
                "maximum",
                "maxItems",
                "minItems",
                "enum",
            ):
                assert props[name].get(key) == expected.get(key), (spec.name, name, key)
        assert tool.output_schema is not None and tool.output_schema.get("type") == "object", spec.name
        assert tool.description


async def test_scopes_across_agents_and_projects(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    user = new_user_id()
    a_env = base_env(nats_server.url, project_id, project_path, LOOM_USER_ID=user)
    b_env = base_env(nats_server.url, project_id, project_path)
    elsewhere_env = dict(a_env, LOOM_PROJECT_ID=f"{project_id}-other")
    async with pattern_session(a_env) as a:
        private = (await call(a, "pattern_remember", {"content": "A private"}))["memory"]["id"]
        team = await call(
            a, "pattern_remember", {"content": "A team", "scope": "team", "category": "decisions"}
        )
        personal = (
            await call(
                a, "pattern_remember", {"content": "A personal", "scope": "personal", "category": "longterm"}
            )
        )["memory"]["id"]
        team_id = team["memory"]["id"]
        async with pattern_session(b_env) as b:
            seen = await recall_ids(b)
            assert team_id in seen
            assert private not in seen and personal not in seen
            denied = await b.call_tool("pattern_forget", {"memory_id": team_id})
            assert denied.is_error and "memory_id" in text_of(denied) and "creator" in text_of(denied)
            hidden = await b.call_tool("pattern_forget", {"memory_id": private})
            assert hidden.is_error and "no memory" in text_of(hidden)
    async with pattern_session(elsewhere_env) as away:
        seen = await recall_ids(away)
        assert personal in seen
        assert private not in seen and team_id not in seen


async def test_subagent_reads_parent_private_not_core(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    parent_env = base_env(nats_server.url, project_id, project_path)
    child_env = dict(parent_env, LOOM_SUBAGENT_TYPE="reviewer")
    async with pattern_session(parent_env) as parent:
        note = (await call(parent, "pattern_remember", {"content": "parent note"}))["memory"]["id"]
        core = (await call(parent, "pattern_core_memory", {"content": "parent core"}))["memory"]["id"]
    async with pattern_session(child_env) as child:
        health = await call(child, "pattern_health", {})
        assert health["identity"]["parent_id"] == parent_env["LOOM_AGENT_ID"]
        assert health["identity"]["agent_id"] == subagent_id(parent_env["LOOM_AGENT_ID"], "reviewer")
        seen = await recall_ids(child)
        assert note in seen and core not in seen
        refused = await child.call_tool("pattern_forget", {"memory_id": note})
        assert refused.is_error and "parent" in text_of(refused)


async def test_ttl_expiry_and_commit_insight(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    env = base_env(nats_server.url, project_id, project_path, PATTERN_SHORT_TTL_S="2")
    async with pattern_session(env) as s:
        fleeting = (await call(s, "pattern_remember", {"content": "fleeting"}))["memory"]
        kept = (await call(s, "pattern_remember", {"content": "keep me"}))["memory"]["id"]
        committed = await call(s, "pattern_commit_insight", {"memory_id": kept, "content": "kept insight"})
        assert committed["memory"]["category"] == "longterm" and committed["memory"]["expires_at"] is None
        assert fleeting["expires_at"] is not None
        assert await recall_ids(s) == {fleeting["id"], kept}

        async def expired() -> bool:
            return await recall_ids(s) == {kept}

        await eventually(expired, timeout=15)
        got = await call(s, "pattern_recall_context", {})
        assert got["counts"]["expired_recently"] == 1
        assert got["memories"][0]["content"] == "kept insight"


async def test_forget_core_needs_force(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    async with pattern_session(base_env(nats_server.url, project_id, project_path)) as s:
        core = (await call(s, "pattern_core_memory", {"content": "protected"}))["memory"]["id"]
        refused = await s.call_tool("pattern_forget", {"memory_id": core})
        assert refused.is_error and "force" in text_of(refused)
        assert core in await recall_ids(s)
        done = await call(s, "pattern_forget", {"memory_id": core, "force": True})
        assert done["forgotten"] is True
        assert core not in await recall_ids(s)


async def test_cleanup_never_touches_other_agent(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    a_env = base_env(nats_server.url, project_id, project_path)
    b_env = base_env(nats_server.url, project_id, project_path)
    async with pattern_session(a_env) as a, pattern_session(b_env) as b:
        b_team = (await call(b, "pattern_remember_task", {"content": "B task", "scope": "team"}))["memory"][
            "id"
        ]
        b_private = (await call(b, "pattern_remember", {"content": "B recent"}))["memory"]["id"]
        a_own = (await call(a, "pattern_remember", {"content": "A recent"}))["memory"]["id"]
        await eventually(lambda: _visible(a, b_team))
        cleaned = await call(a, "pattern_cleanup", {"older_than_hours": 0})
        assert cleaned["removed"] == [a_own]
        assert {b_team, b_private} <= await recall_ids(b)
        assert b_team in await recall_ids(a)


async def _visible(session: ClientSession, memory_id: str) -> bool:
    return memory_id in await recall_ids(session)


async def test_import_rehomes_under_importer(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    a_env = base_env(nats_server.url, project_id, project_path)
    b_env = base_env(nats_server.url, project_id, project_path)
    victim = b_env["LOOM_AGENT_ID"]
    exports = project_path / "exports"
    exports.mkdir()
    forged = {
        "format": "loom-pattern-memories",
        "version": 1,
        "exported_by": {"agent_id": victim, "project_id": project_id},
        "memories": [
            {
                "id": "a" * 32,
                "scope": "private",
                "category": "longterm",
                "content": "planted in B's space?",
                "agent_id": victim,
                "project_id": project_id,
            },
            {
                "id": "b" * 32,
                "scope": "team",
                "category": "decisions",
                "content": "team note",
                "agent_id": victim,
            },
            {"id": "c" * 32, "scope": "private", "category": "nonsense", "content": "bad category"},
            {"scope": "private", "category": "recent"},
        ],
    }
    (exports / "forged.json").write_text(json.dumps(forged))
    async with pattern_session(a_env) as a:
        res = await call(a, "pattern_import_memories", {"path": "forged.json"})
        assert res["imported"] == 2
        assert [(s["index"], s["reason"].split(":")[0]) for s in res["skipped"]] == [
            (2, "category"),
            (3, "content"),
        ]
        assert any("another agent" in w for w in res["warnings"])
        got = await call(a, "pattern_recall_context", {})
        mine = {m["id"]: m for m in got["memories"]}
        assert set(res["memory_ids"]) == set(mine)
        assert all(m["agent_id"] == a_env["LOOM_AGENT_ID"] and m["own"] for m in mine.values())
        again = await call(a, "pattern_import_memories", {"path": "forged.json"})
        assert again["imported"] == 0
        assert all("already imported" in s["reason"] for s in again["skipped"][:2])
        escaped = await a.call_tool("pattern_import_memories", {"path": "../../outside.json"})
        assert escaped.is_error and "path" in text_of(escaped) and "export directory" in text_of(escaped)
        exported = await call(a, "pattern_export_memories", {"path": "mine.json"})
        assert exported["count"] == 2 and Path(exported["path"]).parent == exports
    async with pattern_session(b_env) as b:
        b_view = await call(b, "pattern_recall_context", {})
        assert not any(m["own"] for m in b_view["memories"])
        assert all(m["agent_id"] != victim for m in b_view["memories"])
    # Nothing was written under B's keys.
    from shared.nats.client import connect
    from shared.nats.jetstream import snapshot

    nc = await connect(url=nats_server.url)
    try:
        kv = await nc.jetstream().key_value(f"loom-{project_id}-memory")
        keys = list(await snapshot(kv))  # not kv.keys(): its end marker can come before the keys
        assert keys and not [k for k in keys if victim in k]
    finally:
        await nc.close()


BAD_INPUTS: dict[str, tuple[dict[str, Any], str]] = {
    "pattern_remember": ({"content": ""}, "content"),
    "pattern_remember_task": ({"content": "x", "priority": 0}, "priority"),
    "pattern_remember_learning": ({"content": "x", "scope": "galaxy"}, "scope"),
    "pattern_commit_insight": ({"memory_id": "not-an-id"}, "memory_id"),
    "pattern_core_memory": ({"content": "x", "scope": "team"}, "scope"),
    "pattern_forget": ({}, "memory_id"),
    "pattern_recall_context": ({"limit": 500}, "limit"),
    "pattern_share_learning": ({"memory_id": "0" * 32, "mode": "teleport"}, "mode"),
    "pattern_cleanup": ({"older_than_hours": -1}, "older_than_hours"),
    "pattern_export_memories": ({"path": "/etc/passwd.json"}, "path"),
    "pattern_import_memories": ({"path": "../outside.json"}, "path"),
    "pattern_remember_bulk": ({"memories": []}, "memories"),
    "pattern_forget_bulk": ({"memory_ids": ["xyz"]}, "memory_ids"),
    "pattern_build_context": ({"budget_tokens": 1}, "budget_tokens"),
    "pattern_read": ({"memory_id": "nope"}, "memory_id"),
    "pattern_pack": ({"summary": "s", "files": ["x" * 501]}, "files"),
    "pattern_restore": ({}, "work_id"),
    "pattern_health": ({"verbose": True}, "verbose"),
}


async def test_every_tool_rejects_bad_input_naming_the_field(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    assert set(BAD_INPUTS) == {spec.name for spec in TOOLS}
    async with pattern_session(base_env(nats_server.url, project_id, project_path)) as s:
        for tool, (args, field) in BAD_INPUTS.items():
            res = await s.call_tool(tool, args)
            assert res.is_error, tool
            text = text_of(res)
            assert field in text, (tool, text)
        # Semantic rules beyond the schema name their field too.
        res = await s.call_tool("pattern_recall_context", {"priority_min": 9, "priority_max": 2})
        assert res.is_error and "priority_min" in text_of(res)
        res = await s.call_tool("pattern_remember", {"content": "é" * 20_000})
        assert res.is_error and "content" in text_of(res) and "bytes" in text_of(res)
        res = await s.call_tool("pattern_recall_context", {"tag": ["typo"]})
        assert res.is_error and "tag: unknown field" in text_of(res)
        # Nothing was stored by any of the failed calls.
        assert await recall_ids(s) == set()


async def test_secret_warning_through_mcp(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    async with pattern_session(base_env(nats_server.url, project_id, project_path)) as s:
        res = await s.call_tool("pattern_remember", {"content": "token: ghp_" + "a1B2" * 9})
        assert not res.is_error
        assert res.structured_content is not None and res.structured_content["warnings"]
        assert "GitHub token" in text_of(res) and "a1B2a1B2" not in text_of(res)
    env = base_env(nats_server.url, project_id, project_path, PATTERN_SECRET_SCAN="0")
    async with pattern_session(env) as quiet:
        res = await quiet.call_tool("pattern_remember", {"content": "token: ghp_" + "a1B2" * 9})
        assert res.structured_content is not None and res.structured_content["warnings"] == []


async def test_handshake_does_not_wait_for_nats(project_id: str, project_path: Path) -> None:
    dead = f"nats://127.0.0.1:{free_port()}"
    env = base_env(dead, project_id, project_path)
    started = time.monotonic()
    async with pattern_session(env, wait_ready=False) as s:
        handshake_s = time.monotonic() - started
        tools = await s.list_tools()
        assert len(tools.tools) == 18
        res = await s.call_tool("pattern_remember", {"content": "nowhere to go"})
        assert res.is_error and "not connected to NATS" in text_of(res)
        health = await s.call_tool("pattern_health", {})
        assert not health.is_error
        assert health.structured_content is not None
        assert health.structured_content["status"] in ("starting", "unavailable")
        assert health.structured_content["connected"] is False
    # The connect attempt alone may take up to 5 s; the handshake did not wait for it.
    assert handshake_s < 5


@pytest.mark.parametrize("websocket", [False, True], ids=["nats", "websocket"])
async def test_pattern_loads_the_websocket_transport_only_for_a_websocket_server(
    websocket: bool, project_id: str, project_path: Path
) -> None:
    """An agent's own process leaves out what it cannot use (shared/footprint.py), as Warp
    does; over ``ws://`` it keeps it and works."""
    with EmbeddedNatsServer(ServerConfig(websocket_port=-1)) as server:
        url = server.websocket_url if websocket else server.url
        assert url is not None
        before = children(os.getpid())
        async with pattern_session(base_env(url, project_id, project_path), forked=False) as s:
            await call(s, "pattern_remember", {"content": "kept over either transport"})
            (pid,) = children(os.getpid()) - before
            assert maps_package(pid, "aiohttp") is websocket


def test_stdout_carries_only_mcp_frames(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    env = without_fabric(also=(PATTERN_ZYGOTE_ENV,))  # its own process; forked: test_pattern_zygote
    env.update(base_env(nats_server.url, project_id, project_path))
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _init_params()},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "pattern_health", "arguments": {}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "pattern_forget", "arguments": {}},
        },
    ]
    errlog = (project_path / "stderr.log").open("wb")
    proc = subprocess.Popen(
        [PATTERN, "--log-level", "DEBUG"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=env,
        cwd=project_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    frames: list[dict[str, Any]] = []
    for req in requests:
        proc.stdin.write((json.dumps(req) + "\n").encode())
        proc.stdin.flush()
        while "id" in req and (not frames or frames[-1].get("id") != req["id"]):
            line = proc.stdout.readline()
            assert line, "server closed stdout"
            frames.append(json.loads(line))  # every line must be a JSON-RPC frame
    proc.stdin.close()
    rest = proc.stdout.read()
    proc.wait(timeout=20)
    errlog.close()
    stderr = (project_path / "stderr.log").read_bytes()
    assert rest.strip() == b""
    assert all(f["jsonrpc"] == "2.0" for f in frames)
    responses = {f["id"]: f for f in frames if "id" in f}
    assert sorted(responses) == [1, 2, 3, 4]
    assert all("result" in f for f in responses.values())
    assert responses[4]["result"]["isError"] is True
    assert b"loom.pattern" in stderr  # the logs went to stderr
    assert proc.returncode == 0


def _init_params() -> dict[str, Any]:
    return {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    }


async def test_bad_identity_is_a_startup_error(project_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "LOOM_PROJECT_ID": "Bad_Project!", "HOME": str(project_path)}
    proc = await asyncio.create_subprocess_exec(
        PATTERN, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    out, err = await proc.communicate()
    assert proc.returncode == 2
    assert out == b""
    assert b"LOOM_PROJECT_ID" in err


async def test_streamable_http_mode_serves_the_same_tools_and_resumes(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    """``pattern --http``: the same server over Streamable HTTP (the official client), with
    event ids a client resumes from; SIGTERM stops it."""
    import anyio
    from mcp.client.streamable_http import streamable_http_client

    from testsupport.mcp import assert_resumes, serving_http

    env = base_env(nats_server.url, project_id, project_path)
    log = tmp_path / "pattern-http.log"
    async with serving_http(PATTERN, env=env, log=log, cwd=project_path) as (proc, url):
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            assert sorted(t.name for t in (await s.list_tools()).tools) == sorted(spec.name for spec in TOOLS)

            async def ready() -> bool:
                res = await s.call_tool("pattern_health", {})
                return bool(res.structured_content and res.structured_content["status"] == "ok")

            await eventually(ready, timeout=20)
            kept = (await call(s, "pattern_remember", {"content": "over http"}))["memory"]["id"]
            assert kept in await recall_ids(s)
        await assert_resumes(url)
        proc.terminate()
        with anyio.fail_after(20):
            assert await proc.wait() == 0  # stopped cleanly
    assert b"Streamable HTTP on" in log.read_bytes()
