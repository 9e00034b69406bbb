"""Fixtures for the deploy tests: copies of deploy/ files that a test may break."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from deploy.checks.common import DEPLOY, REPO
from testsupport.env import strip_fabric


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own NATS_URL, LOOM_* or AGENT_* must not leak into the runner under test."""
    strip_fabric(monkeypatch, also=("AGENT_",))


@pytest.fixture
def broken_copy(tmp_path: Path) -> Callable[[str, Callable[[str], str]], Path]:
    """Copy a file from deploy/ (keeping its folder layout) and apply ``edit`` to its text.

    The edit must change the text, so a test cannot pass by breaking nothing.
    """

    def make(relative: str, edit: Callable[[str], str]) -> Path:
        source = DEPLOY / relative
        target = tmp_path / "deploy" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        original = source.read_text(encoding="utf-8")
        changed = edit(original)
        assert changed != original, f"the edit did not change {relative}"
        target.write_text(changed, encoding="utf-8")
        return target

    return make


@pytest.fixture
def k8s_copy(tmp_path: Path) -> Path:
    """A private copy of deploy/k8s (base and overlays) to break."""
    target = tmp_path / "k8s"
    shutil.copytree(DEPLOY / "k8s", target)
    return target


@pytest.fixture
def docker_copy(tmp_path: Path) -> Path:
    """A copy of deploy/docker placed as in the repo, so relative build paths still resolve."""
    root = tmp_path / "repo"
    shutil.copytree(DEPLOY / "docker", root / "deploy" / "docker")
    for name in ("weft.Dockerfile", "agent.Dockerfile"):
        assert (root / "deploy" / "docker" / name).is_file()
    (root / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    return root / "deploy" / "docker"
