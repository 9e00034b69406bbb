"""The MCP Inspector's CLI (``@modelcontextprotocol/inspector``, pinned with the Node it
needs in test-scenarios/conformance) lists Warp's and Pattern's tools over stdio with
``--strict``: every tool schema portable, not one finding, error or warning (an untyped
``{}``, a ``type`` list). Each server is a real process on a real nats-server, started by
the Inspector as an MCP host starts it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from shared.nats.server import EmbeddedNatsServer
from testsupport.mcp import server_env

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "test-scenarios" / "conformance" / "node_modules" / ".bin"

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        shutil.which("npm") is None, reason="npm is not installed: the Makefile could not install it"
    ),
]


@pytest.mark.parametrize(
    ("part", "some_tool"), [("warp", "warp_work_complete"), ("pattern", "pattern_remember")]
)
async def test_inspector_strict_finds_nothing_in_the_tool_schemas(
    part: str, some_tool: str, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    assert (BIN / "inspector").exists(), "the Inspector is missing: `make test` installs it"
    wanted = server_env(part, nats_server.url, project_id, tmp_path)
    loom = {k: v for k, v in wanted.items() if k.startswith(("NATS_", "LOOM_", "PATTERN_"))}
    command = [str(BIN / "inspector"), "--cli", "--method", "tools/list", "--strict", "--format", "json"]
    # Not a figure under test: the Inspector's 15 s for a server to answer was once too short
    # for a Pattern starting beside a loaded suite (CI, 2026-12-01); the test's own bound holds.
    command += ["--connect-timeout", "120000"]
    for key, value in loom.items():
        command += ["-e", f"{key}={value}"]
    command += ["--", str(Path(sys.executable).parent / part)]
    env = {**wanted, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    with anyio.fail_after(150):
        run = await anyio.run_process(command, env=env, cwd=tmp_path, check=False)
    said = run.stderr.decode(errors="replace")
    assert run.returncode == 0, said[-4000:]
    envelope = json.loads(run.stdout.decode().strip().splitlines()[-1])
    names = [tool["name"] for tool in envelope["result"]["tools"]]
    assert some_tool in names and len(names) == len(set(names))
    assert "schemaFindings" not in envelope, json.dumps(envelope["schemaFindings"])[:4000]
    assert "portability" not in said, said[-4000:]
