"""Channel configuration files (warp.config)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from warp.config import DEFAULT_CHANNELS, ConfigError, ConfigLoader, load_channel_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir(exist_ok=True)
    return path


def test_defaults_without_files(tmp_path: Path, home: Path) -> None:
    config = load_channel_config(tmp_path / "proj", home)
    assert set(config.channels) == {"roadmap", "parallel-work", "errors"}
    assert config.sources == ()


def test_project_file_found_upward_overrides_user_file(tmp_path: Path, home: Path) -> None:
    write(
        home / ".loom" / "config.toml",
        '[channels.deploys]\ndescription = "from user"\nmax_messages = 50\n'
        "[channels.roadmap]\nmax_messages = 7\n",
    )
    project = tmp_path / "repo"
    nested = project / "src" / "pkg"
    nested.mkdir(parents=True)
    write(
        project / ".loom" / "config.json",
        json.dumps(
            {"channels": {"deploys": {"description": "from project", "max_age_s": 60}}, "api_url": "x"}
        ),
    )
    config = load_channel_config(nested, home)
    assert config.channels["deploys"].description == "from project"
    assert config.channels["deploys"].max_age_s == 60
    assert config.channels["deploys"].max_messages == 10_000  # the project entry replaces the user one
    assert config.channels["roadmap"].max_messages == 7
    assert config.channels["errors"] == DEFAULT_CHANNELS["errors"]
    assert config.sources == (home / ".loom" / "config.toml", project / ".loom" / "config.json")


def test_home_config_is_not_mistaken_for_a_project_file(home: Path) -> None:
    write(home / ".loom" / "config.json", json.dumps({"channels": {"mine": {}}}))
    project = home / "code" / "repo"
    project.mkdir(parents=True)
    config = load_channel_config(project, home)
    assert "mine" in config.channels
    assert config.sources == (home / ".loom" / "config.json",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "top level must be an object"),
        (json.dumps({"channels": {"ops": {"max_messages": 0}}}), "channels.ops.max_messages"),
        (json.dumps({"channels": {"ops": {"max_bytes": "lots"}}}), "channels.ops.max_bytes"),
        (json.dumps({"channels": {"ops": {"colour": "red"}}}), "channels.ops.colour"),
        (json.dumps({"channels": {"Bad9Name": {}}}), "channels.*: invalid channel name"),
        (json.dumps({"channels": ["roadmap"]}), "channels"),
    ],
)
def test_bad_project_config_is_rejected_naming_file_and_field(
    tmp_path: Path, home: Path, text: str, expected: str
) -> None:
    path = write(tmp_path / "p" / ".loom" / "config.json", text)
    with pytest.raises(ConfigError) as info:
        load_channel_config(tmp_path / "p", home)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_bad_toml_and_both_formats_rejected(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "p" / ".loom" / "config.toml", "channels = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_channel_config(tmp_path / "p", home)
    write(tmp_path / "p" / ".loom" / "config.json", "{}")
    with pytest.raises(ConfigError, match=r"both config\.json and config\.toml"):
        load_channel_config(tmp_path / "p", home)


def test_loader_follows_edits_and_recovers_from_a_bad_edit(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    loader = ConfigLoader(project, home)
    assert "ops" not in loader.current().channels
    path = write(project / ".loom" / "config.json", json.dumps({"channels": {"ops": {"max_messages": 5}}}))
    assert loader.current().channels["ops"].max_messages == 5
    path.write_text(json.dumps({"channels": {"ops": {"max_messages": 6}}}))
    assert loader.current().channels["ops"].max_messages == 6
    path.write_text(json.dumps({"channels": {"ops": {"max_messages": -1}}}))
    with pytest.raises(ConfigError, match="max_messages"):
        loader.current()
    path.unlink()
    assert "ops" not in loader.current().channels


def test_loader_sees_an_edit_that_keeps_size_and_mtime(tmp_path: Path, home: Path) -> None:
    """Past the racy window only stat is compared; a write still moves ctime."""
    project = tmp_path / "p"
    project.mkdir()
    path = write(project / ".loom" / "config.json", json.dumps({"channels": {"ops": {"max_messages": 5}}}))
    old = time.time() - 3600
    os.utime(path, (old, old))
    loader = ConfigLoader(project, home)
    assert loader.current().channels["ops"].max_messages == 5
    assert loader.current().channels["ops"].max_messages == 5  # not racy: stat only
    path.write_text(json.dumps({"channels": {"ops": {"max_messages": 7}}}))
    os.utime(path, (old, old))
    assert loader.current().channels["ops"].max_messages == 7
