"""``weft`` as an operator runs it: a real process, the bundled nats-server, a real port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import websockets

from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port
from testsupport.env import without_fabric
from testsupport.processes import maps_package
from testsupport.serving import ws_connect
from weft.zygote import ZYGOTE_ENV

WEFT = str(Path(sys.executable).parent / "weft")


def clean_env(tmp_path: Path, *, forked: bool = True, **extra: str) -> dict[str, str]:
    """``forked=False``: a Weft of its own, not forked from the suite's zygote (a test of
    what the process itself holds)."""
    env = without_fabric(also=() if forked else (ZYGOTE_ENV,))
    env.update(LOOM_DATA_DIR=str(tmp_path / "data"), WEFT_NATS_PORT="-1", WEFT_NATS_WS_PORT="-1", **extra)
    return env


@contextmanager
def weft_process(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [WEFT, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


async def wait_healthy(base: str, proc: subprocess.Popen[str]) -> dict[str, object]:
    async with httpx.AsyncClient(base_url=base, timeout=2) as client:
        for _ in range(300):
            if proc.poll() is not None:
                raise AssertionError(
                    f"weft exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
                )
            try:
                response = await client.get("/health")
                if response.status_code == 200:
                    return dict(response.json())
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("weft did not become healthy")


async def test_serve_without_nats_url_starts_bundled_nats_prints_banner_and_keeps_data(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = clean_env(tmp_path)
    base = f"http://127.0.0.1:{port}"
    with weft_process(["serve", "--port", str(port), "--project", "demo-project"], env) as proc:
        health = await wait_healthy(base, proc)
        assert health["project_id"] == "demo-project" and health["nats"] == "connected"
        async with httpx.AsyncClient(base_url=base) as client:
            work = (
                await client.post(
                    "/api/work", json={"task_id": "t", "description": "d", "capability": "code"}
                )
            ).json()
            page = await client.get("/")  # the console, from the installed package's files
            assert page.status_code == 200 and "<title>Loom console</title>" in page.text
            assert (await client.get("/console/main.js")).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
        banner = proc.stderr.read() if proc.stderr else ""
    assert "Application shutdown complete" in banner
    assert f"Console     {base}/   (the fleet live in a browser)" in banner
    assert f"REST API    {base}/api" in banner and f"{base}/docs" in banner
    assert "NATS        nats://127.0.0.1:" in banner and "embedded" in banner
    assert (
        "claude mcp add warp -e NATS_URL=nats://127.0.0.1:" in banner
        and "LOOM_PROJECT_ID=demo-project" in banner
    )
    assert '"mcpServers"' in banner
    assert (tmp_path / "data" / "nats" / "jetstream").is_dir()

    # the second run finds the first run's work in the same data directory
    with weft_process(["serve", "--port", str(port), "--project", "demo-project"], env) as proc:
        await wait_healthy(base, proc)
        async with httpx.AsyncClient(base_url=base) as client:
            again = await client.get(f"/api/work/{work['id']}")
        assert again.status_code == 200 and again.json()["status"] == "queued"
        # Ctrl-C is a person's normal stop: a clean shutdown and status 0 (`make run` no "Error 130")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        assert "Application shutdown complete" in (proc.stderr.read() if proc.stderr else "")


async def test_serve_with_nats_url_and_tokens(tmp_path: Path, nats_server: EmbeddedNatsServer) -> None:
    port = free_port()
    env = clean_env(tmp_path, NATS_URL=nats_server.url, WEFT_API_TOKENS="t1,t2", WEFT_PORT=str(port))
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"boundaries": {"corporate": {"allowed_agent_types": ["copilot"]}}}))
    with weft_process(["serve", "--policy", str(policy)], env) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/api/work")).status_code == 401
            assert (await client.get("/api/work", headers={"Authorization": "Bearer t2"})).status_code == 200
        ws_url = f"ws://127.0.0.1:{port}/api/ws"
        with pytest.raises(websockets.InvalidStatus) as refused:  # a refused token is no server error
            async with ws_connect(ws_url):
                pass
        assert refused.value.response.status_code == 401
        async with ws_connect(ws_url, additional_headers={"Authorization": "Bearer t1"}) as ws:
            assert json.loads(await ws.recv())["type"] == "welcome"
            await ws.send(json.dumps({"type": "ping"}))
            assert json.loads(await ws.recv())["type"] == "pong"
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        banner = proc.stderr.read() if proc.stderr else ""
    # the terminal says what matters: no ERROR for a refused token, no line per WebSocket
    assert " ERROR " not in banner, banner
    assert "connection open" not in banner and '"WebSocket /api/ws"' not in banner
    assert "Application startup complete" in banner
    assert "bearer token required" in banner and "t1" not in banner.replace("http", "")
    assert f"Console     http://127.0.0.1:{port}/   (asks for one of the tokens)" in banner
    assert (
        f"NATS        {nats_server.url}" in banner
        and "embedded" not in banner.split("NATS")[1].split("\n")[0]
    )
    assert "1 boundary rules" in banner


@pytest.mark.parametrize("websocket", [False, True], ids=["nats", "websocket"])
async def test_serve_loads_the_websocket_transport_only_for_a_websocket_server(
    websocket: bool, tmp_path: Path
) -> None:
    """``weft serve`` leaves out nats-py's WebSocket transport (aiohttp) unless its NATS is
    ``ws://`` (shared/footprint.py); either way it serves."""
    with EmbeddedNatsServer(ServerConfig(websocket_port=-1)) as server:
        url = server.websocket_url if websocket else server.url
        assert url is not None
        port = free_port()
        env = clean_env(tmp_path, forked=False, NATS_URL=url)
        with weft_process(["serve", "--port", str(port)], env) as proc:
            health = await wait_healthy(f"http://127.0.0.1:{port}", proc)
            assert health["nats"] == "connected"
            assert maps_package(proc.pid, "aiohttp") is websocket


def test_a_refused_nats_url_is_one_clear_line_from_the_console_script(tmp_path: Path) -> None:
    """``weft serve`` reads which NATS before nats-py loads, to leave out what it will not
    use; a URL refused there is still the settings' one line, naming the field, not echoing."""
    result = run(["serve", "--port", str(free_port())], clean_env(tmp_path, NATS_URL="ftp://ghp_Zq9TOKEN"))
    assert result.returncode == 2, result.stderr
    schemes = "nats://, tls://, ws://, wss://"
    assert result.stderr == f"weft: invalid settings: NATS_URL: must use one of the schemes {schemes}\n"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WEFT, *args], env=env, capture_output=True, text=True, timeout=60)


def run_in_process(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (CliRunner), for commands that end before serving: the same
    output and exit code as the console script, without a Python start per case."""
    from typer.testing import CliRunner

    from weft.cli import app

    scoped: dict[str, str | None] = {k: None for k in os.environ if k not in env}
    scoped.update(env)
    done = CliRunner().invoke(app, args, env=scoped, catch_exceptions=False)
    return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)


def test_bad_configuration_is_one_clear_line(tmp_path: Path, nats_server: EmbeddedNatsServer) -> None:
    env = clean_env(tmp_path)
    bad_policy = tmp_path / "bad.yaml"
    bad_policy.write_text("default:\n  allowed_agent_types: [Not Valid]\n")
    result = run(["serve", "--policy", str(bad_policy)], env)  # the console script itself, once
    assert result.returncode == 2 and "weft:" in result.stderr and "allowed_agent_types" in result.stderr
    result = run_in_process(["serve", "--project", "Bad Project"], env)
    assert result.returncode == 2 and "--project" in result.stderr and "lowercase" in result.stderr
    result = run_in_process(["serve"], {**env, "WEFT_PORT": "99999"})
    assert result.returncode == 2 and "WEFT_PORT" in result.stderr and "65535" in result.stderr
    result = run_in_process(["serve"], {**env, "LOOM_NATS_SYNC": "hourly"})
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "weft: invalid settings: LOOM_NATS_SYNC: LOOM_NATS_SYNC must be 'always'" in result.stderr
    assert "hourly" not in result.stderr
    # a token pasted into the wrong variable is not repeated (issue 21)
    for name in (
        "WEFT_PORT",
        "WEFT_PROJECT_ID",
        "WEFT_LOG_LEVEL",
        "WEFT_SWEEP_INTERVAL_S",
        "LOOM_JS_REPLICAS",
        "LOOM_WORK_ACK_WAIT_S",
    ):
        result = run_in_process(["serve"], {**env, name: "ghp_Zq9TOKEN+sEcReT42"})
        assert result.returncode == 2 and name in result.stderr, (name, result.stderr)
        assert "Zq9TOKEN" not in result.stderr, (name, result.stderr)
    result = run_in_process(["serve", "--project", "ghp_Zq9TOKEN+sEcReT42"], env)
    assert result.returncode == 2 and "Zq9TOKEN" not in result.stderr
    busy = nats_server.client_port
    assert busy is not None
    result = run(["serve", "--port", str(free_port())], {**env, "WEFT_NATS_PORT": str(busy)})
    assert result.returncode != 0 and f"port {busy}" in result.stderr and "NATS_URL" in result.stderr


def test_check_policy_openapi_and_version(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    policy = tmp_path / "p.yaml"
    policy.write_text("boundaries:\n  corporate:\n    allowed_agent_types: [copilot]\n")
    checked = run(["check-policy", str(policy)], env)
    assert checked.returncode == 0 and json.loads(checked.stdout)["boundaries"]["corporate"][
        "allowed_agent_types"
    ] == ["copilot"]
    assert run(["check-policy", str(tmp_path / "missing.yaml")], env).returncode == 2
    spec = run(["openapi"], env)
    assert spec.returncode == 0 and "/api/work/{work_id}/cancel" in json.loads(spec.stdout)["paths"]
    assert run(["version"], env).stdout.strip() == "0.1.0"


@pytest.mark.parametrize("args", [[], ["--help"]])
def test_help(args: list[str], tmp_path: Path) -> None:
    result = run(args, clean_env(tmp_path))
    assert "serve" in result.stdout + result.stderr
