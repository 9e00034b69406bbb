"""Runner-side check: the workflow's own script, run locally against a real
nats-server over wss:// (TLS WebSocket), starts a scripted MCP agent that drives
a real Warp over stdio; the agent registers and claims and completes a work
item that was submitted to a real Weft over REST."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx
from deploy_weft_process import running_weft

from deploy.checks.common import REPO
from deploy.runner.config import agent_id_for
from testsupport.servers import TlsServer

SCRIPT = REPO / "deploy" / "github-actions" / "run-agent.sh"
TOKEN = "e2e-token"


async def run_script(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        str(SCRIPT), *args, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, err.decode(errors="replace")


async def test_agent_over_wss_registers_and_completes_work_submitted_to_weft(
    nats_tls_server: TlsServer, project_id: str, tmp_path: Path
) -> None:
    assert nats_tls_server.websocket_url.startswith("wss://")
    weft_env = {
        "NATS_URL": nats_tls_server.url,
        "NATS_TLS_CA": str(nats_tls_server.ca_file),
        "WEFT_HOST": "127.0.0.1",
        "WEFT_API_TOKENS": TOKEN,
        "WEFT_PROJECT_ID": project_id,
        "LOOM_DATA_DIR": str(tmp_path / "weft-data"),
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Loom-Project": project_id}
    async with (
        running_weft(weft_env, tmp_path / "weft.log") as base,
        httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as weft,
    ):
        submitted = await weft.post(
            "/api/work", json={"task_id": "e2e-1", "description": "say hello", "capability": "code"}
        )
        assert submitted.status_code == 201, submitted.text
        work_id = submitted.json()["id"]

        correlation_id = f"e2e-{project_id}"
        # The runner gets only the wss:// URL: every NATS byte of runner and Warp goes over TLS WebSocket.
        runner_env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "LOOM_PYTHON": sys.executable,
            "NATS_URL": nats_tls_server.websocket_url,
            "NATS_TLS_CA": str(nats_tls_server.ca_file),
            "LOOM_CORRELATION_ID": correlation_id,
            "LOOM_PROJECT_ID": project_id,
            "LOOM_WORK_ID": work_id,
            "LOOM_AGENT_TYPE": "claude-code",
            "LOOM_PROJECT_PATH": str(tmp_path),
            "AGENT_COMMAND": f"{sys.executable} -m deploy.runner.scripted_agent {{mcp_config}}",
            "AGENT_TIMEOUT_S": "90",
        }
        code, err = await run_script(runner_env, "run")
        assert code == 0, err

        agent_id = agent_id_for(correlation_id)
        item = (await weft.get(f"/api/work/{work_id}")).json()
        assert item["status"] == "completed", item
        assert item["assigned_to"] == agent_id and item["attempts"] == 1
        assert item["result"] == {"by": "scripted-agent", "work_id": work_id}
        assert item["progress"]["percent"] == 100

        agent = await weft.get(f"/api/agents/{agent_id}")
        assert agent.status_code == 200, agent.text
        entry = agent.json()
        assert entry["capabilities"] == ["code"] and entry["agent_type"] == "claude-code"
        assert entry["spinup_id"] == correlation_id  # how Weft recognises the agent it started
        assert entry["status"] == "offline"  # deregistered at the end of the run
    assert "pw" not in err


async def test_a_scripted_failure_is_a_work_failure_seen_by_weft(
    nats_tls_server: TlsServer, project_id: str, tmp_path: Path
) -> None:
    """The agent fails its item itself (warp_work_fail) and exits 0: the item is queued again."""
    weft_env = {
        "NATS_URL": nats_tls_server.url,
        "NATS_TLS_CA": str(nats_tls_server.ca_file),
        "WEFT_HOST": "127.0.0.1",
        "WEFT_API_TOKENS": TOKEN,
        "WEFT_PROJECT_ID": project_id,
        "LOOM_DATA_DIR": str(tmp_path / "weft-data"),
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Loom-Project": project_id}
    async with (
        running_weft(weft_env, tmp_path / "weft.log") as base,
        httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as weft,
    ):
        submitted = await weft.post(
            "/api/work", json={"task_id": "e2e-2", "description": "fail please", "capability": "code"}
        )
        work_id = submitted.json()["id"]
        runner_env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "LOOM_PYTHON": sys.executable,
            "NATS_URL": nats_tls_server.websocket_url,
            "NATS_TLS_CA": str(nats_tls_server.ca_file),
            "LOOM_CORRELATION_ID": f"e2e-fail-{project_id}",
            "LOOM_PROJECT_ID": project_id,
            "LOOM_WORK_ID": work_id,
            "LOOM_PROJECT_PATH": str(tmp_path),
            "AGENT_COMMAND": f"{sys.executable} -m deploy.runner.scripted_agent --fail {{mcp_config}}",
        }
        code, err = await run_script(runner_env, "run")
        assert code == 0, err
        item = (await weft.get(f"/api/work/{work_id}")).json()
        assert item["status"] == "queued" and item["attempts"] == 1
        assert item["errors"][0]["error"] == "scripted failure"
