"""Safe defaults: Weft does not open its API to the network without tokens, and the bundled
nats-server listens on loopback only (issue 24)."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from test_weft_cli import clean_env, run, wait_healthy, weft_process

from shared.nats.server import free_port
from weft.runtime import EMBEDDED_HOST, start_embedded
from weft.settings import WeftSettings, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.53", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.1.2.3", False),
        ("weft.example.com", False),
    ],
)
def test_loopback_rule(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_exposure_rule() -> None:
    exposed = WeftSettings(host="0.0.0.0", project_id="p")
    problem = exposed.exposure_problem()
    assert problem is not None and "WEFT_API_TOKENS" in problem and "WEFT_ALLOW_OPEN_API" in problem
    assert WeftSettings(host="0.0.0.0", api_tokens="t", project_id="p").exposure_problem() is None
    assert WeftSettings(host="127.0.0.1", project_id="p").exposure_problem() is None
    assert WeftSettings(host="0.0.0.0", allow_open_api=True, project_id="p").exposure_problem() is None


@pytest.mark.parametrize("how", ["option", "env"])
def test_serve_on_all_interfaces_without_tokens_refuses_to_start(tmp_path: Path, how: str) -> None:
    env = clean_env(tmp_path, WEFT_PORT=str(free_port()))
    args = ["serve"]
    if how == "option":
        args += ["--host", "0.0.0.0"]
    else:
        env["WEFT_HOST"] = "::"
    result = run(args, env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("weft: refusing to serve the API on a non-loopback address")
    assert "WEFT_API_TOKENS" in result.stderr and "WEFT_ALLOW_OPEN_API" in result.stderr
    assert result.stderr.count("\n") == 1
    # nothing was started: no nats-server data was written
    assert not (tmp_path / "data" / "nats").exists()


async def test_serve_on_all_interfaces_with_tokens_starts(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(tmp_path, WEFT_API_TOKENS="tok-exposure", WEFT_PORT=str(port))
    with weft_process(["serve", "--host", "0.0.0.0"], env) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/api/agents")).status_code == 401


async def test_the_override_serves_an_open_api_and_says_so_loudly(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(tmp_path, WEFT_ALLOW_OPEN_API="1", WEFT_PORT=str(port))
    with weft_process(["serve", "--host", "0.0.0.0"], env) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/api/agents")).status_code == 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert "WARNING" in stderr and "OPEN to everyone" in stderr
    assert "OPEN TO THE NETWORK" in stderr  # the banner's Auth line


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as /proc shows them) listening on ``port``."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, state = fields[1], fields[3]
            host, _, hexport = address.rpartition(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                found.add(host)
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
async def test_embedded_nats_server_listens_on_loopback_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "data"))
    assert is_loopback(EMBEDDED_HOST)
    settings = WeftSettings(project_id="p", nats_port=-1, nats_ws_port=-1, nats_sync="1s")
    server = await start_embedded(settings)
    try:
        assert server.client_port is not None and server.websocket_port is not None
        for port in (server.client_port, server.websocket_port):
            assert _listening(port) == {"0100007F"}, port  # 127.0.0.1, nothing else
    finally:
        server.stop()
