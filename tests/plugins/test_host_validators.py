"""The hosts' own validators run on the marketplace and the plugin (docs/hosts.md, Tests):
Claude Code's ``claude plugin validate --strict`` (the pinned npm package the Makefile
installs with ``npm ci`` in tests/plugins/hosts; no account, no network at run time)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = Path(__file__).with_name("hosts") / "node_modules" / ".bin" / "claude"

pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None, reason="npm is not installed: the Makefile could not install Claude Code"
)


def validate(target: Path, home: Path) -> subprocess.CompletedProcess[str]:
    assert CLAUDE.exists(), "Claude Code is missing: `make test` installs it (npm ci in tests/plugins/hosts)"
    env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return subprocess.run(
        [str(CLAUDE), "plugin", "validate", str(target), "--strict"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("target", [ROOT, ROOT / "plugins" / "loom"], ids=["marketplace", "plugin"])
def test_claude_code_validates_the_marketplace_and_the_plugin_strictly(target: Path, tmp_path: Path) -> None:
    done = validate(target, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed" in done.stdout


def test_claude_code_lists_every_part_of_the_plugin(tmp_path: Path) -> None:
    said = validate(ROOT / "plugins" / "loom", tmp_path).stdout
    for part in (
        "hooks: SessionStart",
        "hooks: PreToolUse",
        "mcpServers: loom stdio",
        "agents: loom:loom-reviewer",
    ):
        assert part in said, said
    assert said.count("skills: loom:") == 8


def test_claude_code_refuses_a_plugin_that_declares_its_hooks_in_a_bad_shape(tmp_path: Path) -> None:
    """The validator run above can fail: a copy of the plugin whose hooks file is broken."""
    copy = tmp_path / "loom"
    shutil.copytree(ROOT / "plugins" / "loom", copy)
    (copy / "hooks" / "hooks.json").write_text('{"hooks": {"PreToolUse": "not a list"}}')
    done = validate(copy, tmp_path / "home")
    assert done.returncode != 0
