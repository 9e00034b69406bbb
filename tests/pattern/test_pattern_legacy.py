"""Pattern configured and called the TypeScript Pattern's way: read with that meaning, or refused
naming ours (docs/migrating.md). Real ``pattern`` processes over MCP stdio."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp_types import CallToolResult
from pattern_helpers import new_agent_id, new_user_id
from test_pattern_mcp import PATTERN, call, pattern_session, recall_ids, text_of

from shared.nats.server import EmbeddedNatsServer
from testsupport.mcp import unknown_tool

SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="


def original_env(nats_url: str, project_id: str, project_path: Path, **extra: str) -> dict[str, str]:
    """Settings as the original Pattern's README gives them (LOOMINAL_*), no LOOM_* identity."""
    env = {
        "NATS_URL": nats_url,
        "LOOMINAL_PROJECT_ID": project_id,
        "LOOMINAL_AGENT_ID": new_agent_id(),
        "LOOM_USER_ID": new_user_id(),
        "LOOM_PROJECT_PATH": str(project_path),
        "PATTERN_EXPORT_DIR": str(project_path / "exports"),
    }
    env.update(extra)
    return env


async def refused(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[str, str, Any]:
    """A refusal's code, message and details (from ``_meta["loom/error"]``), checked against its text."""
    res: CallToolResult = await session.call_tool(tool, args)
    assert res.is_error, text_of(res)
    assert res.structured_content is None  # strict TypeScript SDK clients check it against the success schema
    body = (res.meta or {}).get("loom/error")
    assert isinstance(body, dict) and set(body) == {"error", "message", "details"}, body
    assert body["message"] == text_of(res)
    return body["error"], body["message"], body["details"]


def start_fails(env: dict[str, str]) -> str:
    """A pattern process that must refuse to start: its stderr line (exit code 2)."""
    done = subprocess.run(
        [PATTERN], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    return done.stderr


async def test_a_subagent_set_up_the_original_way_cannot_touch_its_parents_memories(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    parent_env = original_env(nats_server.url, project_id, project_path)
    parent_id = parent_env["LOOMINAL_AGENT_ID"]
    child_env = dict(parent_env, LOOMINAL_SUBAGENT_TYPE="explore")
    async with pattern_session(parent_env) as parent:
        health = await call(parent, "pattern_health", {})
        assert health["identity"]["agent_id"] == parent_id and health["identity"]["parent_id"] is None
        core = (await call(parent, "pattern_core_memory", {"content": "parent core"}))["memory"]["id"]
        personal_core = (
            await call(
                parent, "pattern_core_memory", {"content": "parent personal core", "scope": "personal"}
            )
        )["memory"]["id"]
        notes = (await call(parent, "pattern_remember", {"content": "parent notes", "category": "longterm"}))[
            "memory"
        ]["id"]
        async with pattern_session(child_env) as child:
            me = (await call(child, "pattern_health", {}))["identity"]
            assert me["parent_id"] == parent_id and me["subagent_type"] == "explore"
            assert me["agent_id"] not in (parent_id, None)
            seen = await recall_ids(child)
            assert notes in seen  # the parent's private memories are readable ...
            assert core not in seen and personal_core not in seen  # ... but never its core ones
            for tool, args in (
                ("pattern_forget", {"memory_id": notes}),
                ("pattern_commit_insight", {"memory_id": notes, "content": "rewritten"}),
                ("pattern_share_learning", {"memory_id": notes, "mode": "move"}),
            ):
                code, message, details = await refused(child, tool, args)
                assert code == "ACCESS_DENIED", (tool, message)
                assert details["field"] == "memory_id"
            for memory_id in (core, personal_core):
                code, _, _ = await refused(child, "pattern_forget", {"memory_id": memory_id, "force": True})
                assert code in ("MEMORY_NOT_FOUND", "ACCESS_DENIED")
            bulk = await call(child, "pattern_forget_bulk", {"memory_ids": [notes, core], "force": True})
            assert bulk["forgotten"] == 0 and bulk["failed"] == 2
        mine = await recall_ids(parent)
        assert {core, personal_core, notes} <= mine
        kept = await call(parent, "pattern_recall_context", {"categories": ["longterm"]})
        assert [m["content"] for m in kept["memories"] if m["id"] == notes] == ["parent notes"]


async def test_the_original_content_scan_switches(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    for switch in ({"PATTERN_DISABLE_CONTENT_SCAN": "true"}, {"PATTERN_CONTENT_SCANNING": "false"}):
        async with pattern_session(original_env(nats_server.url, project_id, project_path, **switch)) as s:
            assert (await call(s, "pattern_health", {}))["secret_scan"] == "off", switch
            stored = await call(
                s, "pattern_remember", {"content": "connect with postgres://app:hunter22@db/app"}
            )
            assert stored["warnings"] == []
    async with pattern_session(
        original_env(nats_server.url, project_id, project_path, PATTERN_DISABLE_CONTENT_SCAN="false")
    ) as s:
        assert (await call(s, "pattern_health", {}))["secret_scan"] == "warn"
    base = original_env(nats_server.url, project_id, project_path)
    line = start_fails(dict(base, PATTERN_DISABLE_CONTENT_SCAN="true", PATTERN_SECRET_SCAN="block"))
    assert "PATTERN_DISABLE_CONTENT_SCAN and PATTERN_SECRET_SCAN" in line
    line = start_fails(dict(base, PATTERN_ENCRYPTION_KEY=SECRET))
    assert "PATTERN_ENCRYPTION_KEY" in line and SECRET not in line
    line = start_fails(dict(base, PATTERN_CONTENT_SCANNING=SECRET))
    assert "PATTERN_CONTENT_SCANNING: must be true or false" in line and SECRET not in line


async def test_a_priority_on_the_original_scale_never_lands_inverted(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    async with pattern_session(original_env(nats_server.url, project_id, project_path)) as s:
        for metadata in ({"priority": 1}, {"priority": "1"}, {"priority": 3, "source": "x"}):
            code, message, _ = await refused(
                s, "pattern_remember", {"content": "urgent", "metadata": metadata}
            )
            assert code == "VALIDATION_ERROR"
            assert "metadata: priority is the TypeScript Pattern's metadata key" in message
            assert "1 (low) to 10 (high)" in message
        code, message, _ = await refused(
            s,
            "pattern_remember_bulk",
            {"memories": [{"content": "a"}, {"content": "b", "metadata": {"priority": 1}}]},
        )
        assert code == "VALIDATION_ERROR" and "memories.1.metadata" in message
        assert await recall_ids(s) == set()  # nothing was stored
        code, message, _ = await refused(
            s, "pattern_remember", {"content": "x", "metadata": {"tags": ["api"]}}
        )
        assert "use tags" in message
        code, message, _ = await refused(s, "pattern_recall_context", {"minPriority": 1, "maxPriority": 2})
        assert "minPriority: this is the TypeScript Pattern's name; use priority_min" in message
        assert "maxPriority" in message and "high is 8, medium 5, low 2" in message
        # the source key has the same meaning in both: a plain pair
        kept = await call(
            s, "pattern_remember", {"content": "kept", "metadata": {"source": "review"}, "priority": 8}
        )
        assert kept["memory"]["metadata"] == {"source": "review"} and kept["memory"]["priority"] == 8


async def test_the_original_export_file_imports_with_its_meaning(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    memories = [
        {
            "id": "550e8400-e29b-41d4-a716-44665544000" + str(n),
            "agentId": "someone",
            "projectId": "old",
            "scope": scope,
            "category": category,
            "content": f"memory {n}",
            "metadata": meta,
            "createdAt": "2025-12-01T10:00:00.000Z",
            "updatedAt": "2025-12-02T10:00:00.000Z",
            "version": 1,
        }
        for n, (scope, category, meta) in enumerate(
            [
                ("private", "longterm", {"priority": 1, "tags": ["api"]}),
                ("team", "decisions", {"priority": 2, "relatedTo": ["a", "b"], "source": "review"}),
                ("personal", "core", {"priority": 3}),
                ("private", "longterm", {}),
                ("private", "longterm", {"priority": 7}),
            ]
        )
    ]
    exports = project_path / "exports"
    exports.mkdir()
    document = {
        "version": "1.0",
        "exportedAt": "2025-12-03T00:00:00.000Z",
        "projectId": "old",
        "agentId": "someone",
        "memories": memories,
    }
    (exports / "backup.json").write_text(json.dumps(document))
    async with pattern_session(original_env(nats_server.url, project_id, project_path)) as s:
        result = await call(s, "pattern_import_memories", {"path": "backup.json"})
        assert result["imported"] == 4
        assert [(k["index"], "priority" in k["reason"]) for k in result["skipped"]] == [(4, True)]
        got = await call(s, "pattern_recall_context", {})
        by_content = {m["content"]: m for m in got["memories"]}
        assert {c: m["priority"] for c, m in by_content.items()} == {
            "memory 0": 8,
            "memory 1": 5,
            "memory 2": 2,
            "memory 3": 5,
        }
        assert by_content["memory 0"]["tags"] == ["api"]
        assert by_content["memory 1"]["metadata"] == {"related_to": "a,b", "source": "review"}
        assert by_content["memory 2"]["scope"] == "personal" and by_content["memory 2"]["category"] == "core"
        again = await call(s, "pattern_import_memories", {"path": "backup.json"})
        assert again["imported"] == 0  # the same file twice adds nothing


async def test_the_original_tool_names_and_arguments_name_ours(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    async with pattern_session(original_env(nats_server.url, project_id, project_path)) as s:
        for old, new in (("remember", "pattern_remember"), ("recall-context", "pattern_recall_context")):
            code, message = await unknown_tool(s, old, {"content": "x"})
            assert code == "unknown_tool" and f"use {new}" in message
        code, message = await unknown_tool(s, "no_such_tool", {})
        assert code == "unknown_tool" and "no_such_tool" in message
        code, message = await unknown_tool(s, "X" + SECRET, {})
        assert code == "unknown_tool" and SECRET not in message
        stored = (await call(s, "pattern_remember", {"content": "x", "category": "longterm"}))["memory"]["id"]
        code, message, _ = await refused(s, "pattern_forget", {"memoryId": stored})
        assert (
            code == "VALIDATION_ERROR"
            and "memoryId: this is the TypeScript Pattern's name; use memory_id" in message
        )
        code, message, _ = await refused(
            s, "pattern_share_learning", {"memory_id": stored, "keepOriginal": True}
        )
        assert "keepOriginal" in message and "use mode" in message
        code, message, _ = await refused(s, "pattern_cleanup", {"expireOnly": True, SECRET: 1})
        assert "expireOnly" in message and "unknown field" in message and SECRET not in message
        code, message, _ = await refused(s, "pattern_export_memories", {"outputPath": "/tmp/x.json"})
        assert "use path" in message and "/tmp/x.json" not in message


async def test_refusals_carry_the_originals_codes(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path
) -> None:
    async with pattern_session(original_env(nats_server.url, project_id, project_path)) as s:
        core = (await call(s, "pattern_core_memory", {"content": "me"}))["memory"]["id"]
        code, _, details = await refused(s, "pattern_forget", {"memory_id": core})
        assert code == "CORE_PROTECTED" and details == {"field": "force"}
        code, _, _ = await refused(s, "pattern_commit_insight", {"memory_id": core})
        assert code == "CORE_PROTECTED"
        code, _, details = await refused(s, "pattern_forget", {"memory_id": "0" * 32})
        assert code == "MEMORY_NOT_FOUND" and details == {"field": "memory_id"}
        code, _, _ = await refused(s, "pattern_remember", {"content": "x", "priority": 11})
        assert code == "VALIDATION_ERROR"
        code, _, _ = await refused(s, "pattern_import_memories", {"path": "missing.json"})
        assert code == "VALIDATION_ERROR"
