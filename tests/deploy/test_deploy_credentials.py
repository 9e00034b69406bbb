"""In-cluster agents read their NATS credentials from one Secret through the
Kubernetes API (a real HTTP server stands in for the API server)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from deploy.runner import cli
from deploy.runner.config import ConfigError
from deploy.runner.credentials import api_url, environment_with_credentials, nats_credentials

TOKEN = "sa-token-123"
SECRET = {
    "NATS_URL": "nats://nats.loom.svc.cluster.local:4222",
    "NATS_USER": "agent",
    "NATS_PASS": "agent-pw-456",
    "unrelated": "ignored",
}


class FakeApiServer(BaseHTTPRequestHandler):
    requests: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        FakeApiServer.requests.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"kind": "Status", "reason": "Unauthorized"})
        elif self.path == "/api/v1/namespaces/loom-agents/secrets/loom-nats-agent":
            data = {k: base64.b64encode(v.encode()).decode() for k, v in SECRET.items()}
            self._answer(200, {"kind": "Secret", "data": data})
        elif self.path == "/api/v1/namespaces/loom-agents/secrets/empty":
            self._answer(200, {"kind": "Secret", "data": {"other": "eA=="}})
        else:
            self._answer(403, {"kind": "Status", "reason": "Forbidden"})

    def _answer(self, code: int, body: object) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def api() -> Iterator[str]:
    FakeApiServer.requests = []
    server = HTTPServer(("127.0.0.1", 0), FakeApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sa_dir(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "namespace").write_text("loom-agents")
    return tmp_path


def env_for(api: str, sa_dir: Path, secret: str = "loom-nats-agent") -> dict[str, str]:
    return {"LOOM_NATS_SECRET_NAME": secret, "LOOM_K8S_API_URL": api, "LOOM_K8S_SA_DIR": str(sa_dir)}


def test_reads_the_nats_keys_of_the_secret(api: str, sa_dir: Path) -> None:
    values = nats_credentials(env_for(api, sa_dir))
    assert values == {k: v for k, v in SECRET.items() if k.startswith("NATS_")}
    assert FakeApiServer.requests == [
        ("/api/v1/namespaces/loom-agents/secrets/loom-nats-agent", f"Bearer {TOKEN}")
    ]
    merged = environment_with_credentials({**env_for(api, sa_dir), "NATS_URL": "nats://other:4222"})
    assert merged["NATS_URL"] == SECRET["NATS_URL"] and merged["NATS_PASS"] == "agent-pw-456"


def test_nothing_happens_without_loom_nats_secret() -> None:
    assert nats_credentials({}) == {}
    assert environment_with_credentials({"NATS_URL": "wss://x"}) == {"NATS_URL": "wss://x"}


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("other-secret", "refused to read Secret loom-agents/other-secret (403)"),
        ("empty", "has none of the keys"),
        ("Bad_Name", "must be a Kubernetes Secret name"),
    ],
)
def test_api_errors_name_the_variable(api: str, sa_dir: Path, secret: str, message: str) -> None:
    with pytest.raises(
        ConfigError, match=r"^LOOM_NATS_SECRET_NAME: .*" + message.replace("(", r"\(").replace(")", r"\)")
    ):
        nats_credentials(env_for(api, sa_dir, secret))


def test_a_missing_token_or_cluster_is_explained(api: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="service-account token"):
        nats_credentials(env_for(api, tmp_path))
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST is unset"):
        api_url({})
    assert api_url({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}) == (
        "https://10.0.0.1:6443"
    )


def test_an_unreachable_api_is_a_config_error_without_the_token(
    sa_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **env_for(f"http://127.0.0.1:{port}", sa_dir),
        "LOOM_CORRELATION_ID": "r1",
        "LOOM_CAPABILITIES": "code",
        "LOOM_PROJECT_ID": "p",
        "NATS_URL": "nats://nats:4222",
        "AGENT_COMMAND": "true",
    }
    assert cli.main(["--allow-insecure", "run"], env) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "LOOM_NATS_SECRET_NAME: cannot reach the Kubernetes API" in err and TOKEN not in err
