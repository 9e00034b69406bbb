"""Shuttle configured the TypeScript Shuttle's way: read with that meaning, or refused naming ours
(docs/migrating.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shuttle_helpers import run, run_process

from shuttle.config import resolve
from shuttle.errors import UsageError

SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="


def test_project_id_is_read_as_the_project(clean_env: Path) -> None:
    settings = resolve({}, env={"PROJECT_ID": "old-project"})
    assert settings.project_id == "old-project" and settings.sources["project_id"] == "env:PROJECT_ID"
    same = resolve({}, env={"PROJECT_ID": "p1", "LOOM_PROJECT_ID": "p1"})
    assert same.sources["project_id"] == "env:LOOM_PROJECT_ID"
    with pytest.raises(UsageError) as err:
        resolve({}, env={"PROJECT_ID": "p1", "LOOM_PROJECT_ID": "p2"})
    assert "PROJECT_ID and LOOM_PROJECT_ID are all set and disagree" in str(err.value)
    assert "p1" not in str(err.value).replace("PROJECT_ID", "")


def test_the_original_config_keys_name_ours(clean_env: Path) -> None:
    path = clean_env / ".loom" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"apiUrl": "http://old:3000", "apiToken": SECRET, "projectId": "p"}))
    done = run_process("config", "list", env={"HOME": str(clean_env)})
    assert done.exit_code == 2
    assert f"config file {path}: apiUrl: this is the TypeScript Shuttle's key; use api_url; " in done.stderr
    assert "apiToken: this is the TypeScript Shuttle's key; use api_token" in done.stderr
    assert "projectId: this is the TypeScript Shuttle's key; use project_id" in done.stderr
    assert SECRET not in done.stderr and "http://old:3000" not in done.stderr
    path.write_text(json.dumps({"outputFormat": "json"}))
    done = run("config", "list")
    assert done.exit_code == 2 and "outputFormat" in done.stderr and "--json" in done.stderr
    done = run("config", "set", "apiUrl", "http://new:8080")
    assert done.exit_code == 2 and "apiUrl: this is the TypeScript Shuttle's key; use api_url" in done.stderr
    path.write_text(json.dumps({"api_url": "http://new:8080"}))
    assert run("config", "get", "api_url").stdout.strip() == "http://new:8080"
