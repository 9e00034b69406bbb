"""Every MCP tool's published contract is pinned: name, order, title, annotations, and a digest of
its description, input schema and output schema, as ``tools/list`` shows them to the official
client from ``warp``, ``pattern`` and ``warp --with-memory`` (Warp's tools, then Pattern's).

Agents and their hosts cache tool lists and validate against these schemas, so a change must be
deliberate: when one is, rewrite the pin and review its diff with the change::

    .venv/bin/python tests/shared/mcp/test_tool_contract.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from testsupport.zygote import zygote_env

BIN = Path(sys.executable).parent
PIN = Path(__file__).with_name("tool_contract.json")
SERVERS = {
    "warp": [str(BIN / "warp")],
    "pattern": [str(BIN / "pattern")],
    "warp --with-memory": [str(BIN / "warp"), "--with-memory"],
}
Contract = dict[str, dict[str, Any]]


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def contract_of(tools: list[dict[str, Any]]) -> Contract:
    """Each tool's contract, in ``tools/list`` order (readable fields as they are, schemas digested)."""
    return {
        tool["name"]: {
            "title": tool.get("title"),
            "annotations": tool.get("annotations"),
            "description": digest(tool.get("description")),
            "inputSchema": digest(tool.get("inputSchema")),
            "outputSchema": digest(tool.get("outputSchema")),
        }
        for tool in tools
    }


async def listed(command: list[str], home: Path) -> Contract:
    return contract_of(await tools_of(command, home))


async def tools_of(command: list[str], home: Path) -> list[dict[str, Any]]:
    """``tools/list`` of a freshly started server (no NATS needed: the list never waits for it)."""
    env = {
        "NATS_URL": "nats://127.0.0.1:1",
        "LOOM_PROJECT_ID": "contract",
        "LOOM_PROJECT_PATH": str(home),
        "LOOM_USER_ID": "1" * 16,
        "HOME": str(home),
        **zygote_env(),  # a Warp forked from the suite's zygote (testsupport/zygote.py)
    }
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=home)
    with (home / "stderr.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            result = await s.list_tools()
    return [t.model_dump(mode="json", by_alias=True) for t in result.tools]


TYPING = {"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not", "properties", "items"}
"""JSON schema keywords that say what a value is; a schema with none of them admits anything."""


def untyped(schema: Any, at: str = "") -> list[str]:
    """Where a JSON schema leaves a value untyped (``{}`` or only a title, default or
    description: what Inspector's ``--strict`` warns about)."""
    found: list[str] = []
    if isinstance(schema, dict):
        if not set(schema) & TYPING:
            found.append(at or "/")
        for key, value in schema.items():
            if key in ("properties", "$defs", "patternProperties"):
                for name, sub in value.items():
                    found += untyped(sub, f"{at}/{key}/{name}")
            elif key in ("items", "additionalProperties", "not") or key in ("anyOf", "oneOf", "allOf"):
                found += untyped(value, f"{at}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found += untyped(value, f"{at}[{index}]")
    return found


async def test_every_output_schema_types_every_value(tmp_path: Path) -> None:
    tools = await tools_of(SERVERS["warp --with-memory"], tmp_path)
    assert len(tools) > 60
    loose = {t["name"]: untyped(t["outputSchema"]) for t in tools}
    assert {name: where for name, where in loose.items() if where} == {}
    # the check itself
    assert untyped({"type": "object", "properties": {"result": {"default": None}}}) == ["/properties/result"]


async def current(home: Path) -> dict[str, Contract]:
    return {name: await listed(command, home) for name, command in SERVERS.items()}


async def test_tools_list_is_the_pinned_contract(tmp_path: Path) -> None:
    now = await current(tmp_path)
    pinned: dict[str, Contract] = json.loads(PIN.read_text())
    assert now["warp --with-memory"] == {**now["warp"], **now["pattern"]}
    assert list(now["warp --with-memory"]) == [*now["warp"], *now["pattern"]]
    for server in ("warp", "pattern"):
        assert list(now[server]) == list(pinned[server]), f"{server}: tools added, removed or reordered"
        for name, contract in now[server].items():
            changed = [key for key, value in contract.items() if pinned[server][name].get(key) != value]
            assert not changed, f"{name}: {', '.join(changed)} changed (see this file's docstring)"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: {sys.argv[0]} --write")
    with tempfile.TemporaryDirectory() as scratch:
        found = anyio.run(current, Path(scratch))
    PIN.write_text(json.dumps({"warp": found["warp"], "pattern": found["pattern"]}, indent=1) + "\n")
    print(f"wrote {PIN}: {len(found['warp'])} Warp tools, {len(found['pattern'])} Pattern tools")
