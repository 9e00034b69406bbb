"""Fixtures for the Warp tests (real nats-server from ``testsupport.servers``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.nats.server import EmbeddedNatsServer
from testsupport.env import strip_fabric
from testsupport.zygote import zygote_env


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Warp reads the environment; a developer's NATS_URL, LOOM_* or ~/.loom must not leak in."""
    strip_fabric(monkeypatch)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def warp_env(nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path) -> dict[str, str]:
    """Environment for a spawned Warp in this test's project (HOME is a scratch dir), forked
    from the suite's zygote (testsupport/zygote.py) where there is one."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return {
        "NATS_URL": nats_server.url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(project),
        "HOME": str(home),
        "LOOM_LOG_LEVEL": "INFO",
        **zygote_env(),  # forked from the suite's zygote; test_mcp_process.py starts its own
    }
