"""The public MCP conformance suite (``@modelcontextprotocol/conformance``, pinned with the
Node it needs in test-scenarios/conformance and installed by the Makefile with ``npm ci``)
against Warp's and Pattern's Streamable HTTP mode, each a real process on a real
nats-server. The run passes only when every scenario passes but those in
``expected-failures.yaml`` (the suite's fixture server's own tools, resources and prompts,
and two optional capabilities), and the suite itself fails a run where one of those starts
passing, so the list cannot hide a regression."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from shared.nats.server import EmbeddedNatsServer
from testsupport.mcp import server_env, serving_http

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "test-scenarios" / "conformance"
BIN = SUITE / "node_modules" / ".bin"
EXPECTED = SUITE / "expected-failures.yaml"

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        shutil.which("npm") is None, reason="npm is not installed: the Makefile could not install it"
    ),
]


def server_command(part: str) -> str:
    return str(Path(sys.executable).parent / part)


@pytest.mark.parametrize("part", ["warp", "pattern"])
async def test_the_conformance_suite_passes_but_for_the_fixture_scenarios(
    part: str, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    assert (BIN / "conformance").exists(), "the suite is missing: `make test` installs it (npm ci)"
    env = server_env(part, nats_server.url, project_id, tmp_path)
    log = tmp_path / f"{part}.log"
    async with serving_http(server_command(part), env=env, log=log, cwd=tmp_path) as (server, url):
        suite_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        run = await anyio.run_process(
            [str(BIN / "conformance"), "server", "--url", url, "--expected-failures", str(EXPECTED)],
            env=suite_env,
            cwd=tmp_path,
            check=False,
        )
        server.terminate()
        with anyio.fail_after(20):
            await server.wait()
    report = (run.stdout + run.stderr).decode(errors="replace")
    assert run.returncode == 0, report[-6000:]
    assert "Baseline check passed" in report
    for scenario in (
        "server-initialize",
        "tools-list",
        "ping",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ):
        assert f"✓ {scenario}:" in report, (scenario, report[-3000:])
