"""The plugin marketplace and the plugin, loaded as the hosts load them (docs/hosts.md): the
manifests against their published schemas (vendored in schemas/, never downloaded), every
path they name, the skills and agents' front matter, hooks declared once, one version
everywhere, the launcher's shell."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from deploy.checks.shell import check_shell

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).with_name("schemas")
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
PLUGIN = ROOT / "plugins" / "loom"
LAUNCHER = PLUGIN / "bin" / "loom-launch"
SKILL_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
"""The Agent Skills spec's front matter: what every host accepts (Claude Code takes more)."""
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def schema_errors(document: dict[str, Any], schema_file: str) -> list[str]:
    schema = load(SCHEMAS / schema_file)
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def front_matter(path: Path) -> dict[str, Any]:
    text = path.read_text()
    assert text.startswith("---\n"), f"{path}: no front matter"
    raw, _, body = text[4:].partition("\n---\n")
    assert body.strip(), f"{path}: no body"
    data = yaml.safe_load(raw)
    assert isinstance(data, dict)
    return data


def plugin_root_expanded(text: str, root: Path, variable: str = "CLAUDE_PLUGIN_ROOT") -> str:
    return text.replace("${" + variable + "}", str(root))


def test_the_marketplace_lists_the_loom_plugin_by_a_path_the_host_resolves() -> None:
    market = load(MARKETPLACE)
    assert schema_errors(market, "claude-code-marketplace.schema.json") == []
    (entry,) = market["plugins"]
    assert entry["name"] == "loom" and entry["source"] == "./plugins/loom"
    # relative to the marketplace root (the folder holding .claude-plugin/), never climbing out
    assert ".." not in entry["source"] and (ROOT / entry["source"]).resolve() == PLUGIN
    assert "hooks" not in entry and "mcpServers" not in entry  # components come from the plugin


def test_the_plugin_manifests_pass_their_schemas_and_declare_hooks_only_once() -> None:
    claude = load(PLUGIN / ".claude-plugin" / "plugin.json")
    assert schema_errors(claude, "claude-code-plugin-manifest.schema.json") == []
    # hooks/hooks.json loads by itself: naming it again in the manifest breaks older hosts
    assert "hooks" not in claude and "mcpServers" not in claude
    portable = load(PLUGIN / "plugin.json")
    assert schema_errors(portable, "agent-plugins-1.0.0-plugin.schema.json") == []
    assert schema_errors(load(PLUGIN / "mcp.json"), "agent-plugins-1.0.0-mcp.schema.json") == []
    assert portable["name"] == claude["name"] == "loom"


def test_a_broken_manifest_is_caught_by_the_schemas() -> None:
    """The schema checks above can fail: a component field in the closed Agent Plugins
    manifest, a marketplace entry without a source."""
    portable = {**load(PLUGIN / "plugin.json"), "mcpServers": {}}
    assert any("mcpServers" in e for e in schema_errors(portable, "agent-plugins-1.0.0-plugin.schema.json"))
    market = load(MARKETPLACE)
    market["plugins"] = [{"name": "loom"}]
    assert schema_errors(market, "claude-code-marketplace.schema.json") != []


def test_one_version_everywhere() -> None:
    from warp import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (entry,) = load(MARKETPLACE)["plugins"]
    versions = {
        "pyproject.toml": project,
        "warp.__version__": __version__,
        "marketplace entry": entry["version"],
        ".claude-plugin/plugin.json": load(PLUGIN / ".claude-plugin" / "plugin.json")["version"],
        "plugin.json (Agent Plugins)": load(PLUGIN / "plugin.json")["version"],
    }
    assert len(set(versions.values())) == 1, versions


def test_every_skill_is_portable_and_named_as_its_folder() -> None:
    skills = sorted((PLUGIN / "skills").iterdir())
    assert {s.name for s in skills} >= {
        "loom-worker",
        "loom-reviewer",
        "loom-coordinator",
        "loom-next-work",
        "loom-hand-in",
        "loom-ask",
        "loom-fleet-status",
        "loom-plan",
    }
    for folder in skills:
        meta = front_matter(folder / "SKILL.md")
        assert set(meta) <= SKILL_KEYS, (folder.name, set(meta) - SKILL_KEYS)
        assert meta["name"] == folder.name and SKILL_NAME.fullmatch(folder.name) and len(folder.name) <= 64
        assert 1 <= len(meta["description"]) <= 1024 and "<" not in meta["description"]


def test_every_role_agent_names_a_skill_and_files_that_exist() -> None:
    agents = sorted((PLUGIN / "agents").glob("*.md"))
    assert [a.stem for a in agents] == ["loom-coordinator", "loom-reviewer", "loom-worker"]
    for agent in agents:
        meta = front_matter(agent)
        assert meta["name"] == agent.stem and meta["description"]
        body = agent.read_text()
        named = re.findall(r"\$\{CLAUDE_PLUGIN_ROOT\}/([\w./-]+)", body)
        assert named, f"{agent.name} names no file of the plugin"
        for rel in named:
            assert (PLUGIN / rel).is_file(), f"{agent.name}: {rel} does not exist"
        assert f"skills/{agent.stem}/SKILL.md" in named


def test_the_hooks_file_runs_commands_that_exist() -> None:
    hooks = load(PLUGIN / "hooks" / "hooks.json")["hooks"]
    assert set(hooks) == {"SessionStart", "PreToolUse"}
    assert hooks["PreToolUse"][0]["matcher"] == "Edit|Write|MultiEdit|NotebookEdit"
    for groups in hooks.values():
        for group in groups:
            for handler in group["hooks"]:
                assert handler["type"] == "command" and 1 <= handler["timeout"] <= 60
                command = plugin_root_expanded(handler["command"], PLUGIN)
                program = command.split('"')[1]
                assert Path(program) == LAUNCHER, command
                assert command.split()[-2] == "loom-hook"


def test_the_mcp_servers_start_through_the_launcher() -> None:
    claude = load(PLUGIN / ".mcp.json")["mcpServers"]["loom"]
    assert plugin_root_expanded(claude["command"], PLUGIN) == str(LAUNCHER)
    assert claude["args"] == ["warp", "--with-memory"]
    portable = load(PLUGIN / "mcp.json")["mcpServers"]["loom"]
    assert portable["command"] == "sh"  # a single token: Agent Plugins expands nothing there
    assert plugin_root_expanded(portable["args"][0], PLUGIN, "PLUGIN_ROOT") == str(LAUNCHER)
    assert portable["args"][1:] == claude["args"]


def test_the_launcher_is_an_executable_posix_script_shellcheck_accepts() -> None:
    assert LAUNCHER.stat().st_mode & 0o111
    assert LAUNCHER.read_text().startswith("#!/bin/sh\n")
    assert check_shell(LAUNCHER) == []


@pytest.mark.parametrize("doc", ["docs/hosts.md", "plugins/loom/README.md"])
def test_the_install_docs_name_the_marketplace_and_the_plugin(doc: str) -> None:
    text = (ROOT / doc).read_text()
    assert "/plugin marketplace add" in text and "/plugin install loom@loom" in text
