"""Fixtures for Shuttle's tests: a clean environment, a URL where nothing listens
(Weft down), and a real Weft on the real nats-server."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from shuttle_helpers import Cli
from weft_runner import WeftServer, running_weft

from shared.nats.server import EmbeddedNatsServer
from testsupport.env import strip_fabric


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No LOOM_* (or the TypeScript Shuttle's PROJECT_ID) from the developer's shell, and a
    throw-away HOME for ~/.loom."""
    strip_fabric(monkeypatch)
    for name in ("NO_COLOR", "PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    yield home


@pytest.fixture
def dead_url() -> str:
    """A localhost URL on a port that was free a moment ago (nothing listens)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def weft_server(nats_server: EmbeddedNatsServer) -> Iterator[WeftServer]:
    """One Weft for the session; tests keep apart by project."""
    with running_weft(nats_server.url) as weft:
        yield weft


@pytest.fixture
def cli(weft_server: WeftServer, project_id: str) -> Cli:
    """The CLI pointed at the session's Weft, in a project of its own (via the environment)."""
    return Cli(
        env={
            "LOOM_API_URL": weft_server.url,
            "LOOM_API_TOKEN": weft_server.token,
            "LOOM_PROJECT_ID": project_id,
        },
        weft=weft_server,
        project=project_id,
    )
