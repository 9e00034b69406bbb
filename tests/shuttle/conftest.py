"""Fixtures for Shuttle's tests: a clean environment, a CLI runner, and a URL
where nothing listens (Weft down)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No LOOM_* from the developer's shell, and a throw-away HOME for ~/.loom."""
    for name in list(os.environ):
        if name.startswith(("LOOM_", "LOOMINAL_")) or name == "NO_COLOR":
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
