"""Shuttle's settings: precedence, the file format, validation, and the
``config`` command group (no Weft needed)."""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path

import pytest
from shuttle_helpers import run, run_process

from shuttle.config import DEFAULT_API_URL, read_file, resolve
from shuttle.errors import UsageError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_when_nothing_is_set(clean_env: Path) -> None:
    settings = resolve({}, env={})
    assert settings.api_url == DEFAULT_API_URL
    assert settings.api_token is None and settings.project_id is None
    assert settings.path == clean_env / ".loom" / "config.toml"
    assert set(settings.sources.values()) == {"default"}


def test_precedence_flag_over_env_over_file_over_default(clean_env: Path) -> None:
    write(
        clean_env / ".loom" / "config.toml",
        'api_url = "http://file:1"\nproject_id = "from-file"\ntimeout = 7\n',
    )
    env = {"LOOM_API_URL": "http://env:2", "LOOM_API_TOKEN": "env-token"}
    s = resolve({"api_url": "http://flag:3"}, env=env)
    assert s.api_url == "http://flag:3" and s.sources["api_url"] == "flag"
    assert s.api_token == "env-token" and s.sources["api_token"] == "env:LOOM_API_TOKEN"
    assert s.project_id == "from-file" and s.sources["project_id"] == "file"
    assert s.timeout == 7.0
    s = resolve({}, env=env)
    assert s.api_url == "http://env:2"
    s = resolve({}, env={})
    assert s.api_url == "http://file:1"


def test_project_alias_env(clean_env: Path) -> None:
    s = resolve({}, env={"LOOMINAL_PROJECT_ID": "alias-proj"})
    assert s.project_id == "alias-proj" and s.sources["project_id"] == "env:LOOMINAL_PROJECT_ID"


def test_config_flag_and_loom_config_env_pick_the_file(tmp_path: Path) -> None:
    a = write(tmp_path / "a.toml", 'api_url = "http://a:1"\n')
    b = write(tmp_path / "b.json", json.dumps({"api_url": "http://b:2"}))
    assert resolve({}, config_flag=str(a), env={"LOOM_CONFIG": str(b)}).api_url == "http://a:1"
    assert resolve({}, env={"LOOM_CONFIG": str(b)}).api_url == "http://b:2"


def test_json_file_is_used_when_no_toml_exists(clean_env: Path) -> None:
    write(clean_env / ".loom" / "config.json", json.dumps({"project_id": "jsonproj"}))
    s = resolve({}, env={})
    assert s.path.name == "config.json" and s.project_id == "jsonproj"


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        ({"api_url": "ftp://x"}, {}, "--api-url: api_url must be an http:// or https:// URL"),
        ({}, {"LOOM_API_URL": "localhost:8080"}, "LOOM_API_URL: api_url must be an http://"),
        (
            {},
            {"LOOM_PROJECT_ID": "Bad_Project"},
            "LOOM_PROJECT_ID: project_id must be lowercase",
        ),
        ({"timeout": 0}, {}, "--timeout: timeout must be more than 0"),
        ({}, {"LOOM_API_TIMEOUT": "soon"}, "LOOM_API_TIMEOUT: timeout must be a number"),
        ({}, {"LOOM_API_TOKEN": "has space"}, "LOOM_API_TOKEN: api_token must be 1-4096 printable"),
        ({"api_url": "http://u:p@host"}, {}, "must not carry credentials"),
    ],
)
def test_bad_values_name_their_source_and_rule(
    flags: dict[str, object], env: dict[str, str], expected: str
) -> None:
    with pytest.raises(UsageError) as err:
        resolve(flags, env=env)
    assert expected in err.value.message
    assert err.value.exit_code == 2
    for given in (*flags.values(), *env.values()):  # the rejected value is never repeated
        if given == 0:
            continue  # "0" is part of the rule
        assert str(given) not in err.value.message.split(": ", 1)[1], given


def test_token_value_never_appears_in_its_error() -> None:
    with pytest.raises(UsageError) as err:
        resolve({}, env={"LOOM_API_TOKEN": "sekr3t value"})
    assert "sekr3t" not in err.value.message


def test_bad_file_errors(clean_env: Path) -> None:
    path = write(clean_env / ".loom" / "config.toml", "api_url = \n")
    with pytest.raises(UsageError, match=r"config file .*config.toml: not valid TOML"):
        resolve({}, env={})
    write(path, 'colour = "red"\n')
    with pytest.raises(
        UsageError, match=r"unknown key 'colour' \(known: api_url, api_token, project_id, timeout\)"
    ):
        resolve({}, env={})
    write(path, "timeout = true\n")
    with pytest.raises(UsageError, match="timeout must be a number"):
        resolve({}, env={})
    write(path, 'project_id = "UPPER"\n')
    with pytest.raises(UsageError, match=r"config file .*: project_id must be lowercase"):
        resolve({}, env={})


LAID_OUT = """\
# My Loom settings -- kept by hand
#   (Warp reads the [channels] tables below)

api_url   =   "http://weft.internal:8080"   # the staging Weft
timeout = 7      # seconds; the VPN is slow


# --- Warp's channels ---
[channels.standup]
  description = "Daily standup notes"  # shown in Warp
  max_messages = 50

[[servers]]
name = 'a'   # literal string stays literal
tags = [ "x",   "y" ]
"""


def test_config_set_and_unset_keep_comments_and_layout(clean_env: Path) -> None:
    """`config set` / `unset` edit the one key in place: every comment, blank line,
    indent, quoting style and the other parts' tables stay as the user wrote them."""
    path = write(clean_env / ".loom" / "config.toml", LAID_OUT)
    r = run("config", "set", "timeout", "3")
    assert r.exit_code == 0, r.stderr
    assert path.read_text() == LAID_OUT.replace("timeout = 7 ", "timeout = 3.0 ")
    r = run("config", "set", "project_id", "p1")
    assert r.exit_code == 0, r.stderr
    # A new key goes at the end of the top-level section: tomlkit counts the comment lines
    # above the first table as part of it, so the key lands below them.
    assert path.read_text() == LAID_OUT.replace("timeout = 7 ", "timeout = 3.0 ").replace(
        "# --- Warp's channels ---\n", '# --- Warp\'s channels ---\nproject_id = "p1"\n\n'
    )
    r = run("config", "unset", "api_url")
    assert r.exit_code == 0, r.stderr
    text = path.read_text()
    assert "api_url" not in text and "the staging Weft" not in text
    for kept in (
        "# My Loom settings -- kept by hand",
        "#   (Warp reads",
        "# seconds; the VPN is slow",
        '  description = "Daily standup notes"  # shown in Warp',
        "name = 'a'   # literal",
        'tags = [ "x",   "y" ]',
    ):
        assert kept in text
    assert tomllib.loads(text) == {
        "timeout": 3.0,
        "project_id": "p1",
        "channels": {"standup": {"description": "Daily standup notes", "max_messages": 50}},
        "servers": [{"name": "a", "tags": ["x", "y"]}],
    }
    assert resolve({}, env={}).timeout == 3.0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_config_set_starts_a_new_file_with_a_header(clean_env: Path) -> None:
    path = clean_env / ".loom" / "config.toml"
    r = run("config", "set", "api_token", "-", input='q"uo\\te\n')
    assert r.exit_code == 0, r.stderr
    assert path.read_text().startswith("# Loom user settings")
    assert tomllib.loads(path.read_text()) == {"api_token": 'q"uo\\te'}
    r = run("config", "unset", "project_id")
    assert r.exit_code == 0 and "project_id was not set" in r.stdout


@pytest.mark.parametrize("command", [["set", "timeout", "3"], ["unset", "timeout"]])
def test_config_set_and_unset_refuse_a_broken_file_and_leave_it_alone(
    clean_env: Path, command: list[str]
) -> None:
    path = write(clean_env / ".loom" / "config.toml", "# mine\ntimeout = \n")
    r = run("config", *command)
    assert r.exit_code == 2 and "config.toml: not valid TOML" in r.stderr
    assert path.read_text() == "# mine\ntimeout = \n"
    json_path = write(clean_env / "list.json", "[1, 2]")
    r = run("--config", str(json_path), "config", *command)
    assert r.exit_code == 2 and "list.json: must hold a JSON table of settings" in r.stderr
    assert json_path.read_text() == "[1, 2]"


def test_config_file_that_cannot_be_read_or_written(clean_env: Path) -> None:
    folder = clean_env / "a-folder.toml"
    folder.mkdir()
    r = run("--config", str(folder), "config", "set", "timeout", "3")
    assert r.exit_code == 2 and "a-folder.toml: cannot read it" in r.stderr
    # The atomic write goes through a temporary file next to the target; a folder there
    # makes it fail (permissions would not: the tests may run as root).
    (clean_env / ".loom" / ".config.toml.tmp").mkdir(parents=True)
    r = run("config", "set", "timeout", "3")
    assert r.exit_code == 2 and "config.toml: cannot write it" in r.stderr
    assert not (clean_env / ".loom" / "config.toml").exists()


def test_tables_of_other_parts_in_the_shared_user_file_are_kept(clean_env: Path) -> None:
    """~/.loom/config.toml is shared with Warp: its [channels.*] tables are not Shuttle's
    to judge, and `config set` / `unset` keep them."""
    path = write(
        clean_env / ".loom" / "config.toml",
        '# mine\nproject_id = "shared"\n\n[channels.standup]\ndescription = "Daily standup notes"\n'
        "max_messages = 50\n",
    )
    assert resolve({}, env={}).project_id == "shared"
    r = run("config", "set", "api_url", "http://weft.example:1")
    assert r.exit_code == 0, r.stderr
    r = run("config", "unset", "project_id")
    assert r.exit_code == 0, r.stderr
    assert tomllib.loads(path.read_text()) == {
        "api_url": "http://weft.example:1",
        "channels": {"standup": {"description": "Daily standup notes", "max_messages": 50}},
    }
    json_path = write(
        clean_env / "shared.json", json.dumps({"channels": {"ops": {"max_messages": 5}}, "timeout": 4})
    )
    r = run("--config", str(json_path), "config", "set", "project_id", "p1")
    assert r.exit_code == 0
    assert json.loads(json_path.read_text()) == {
        "channels": {"ops": {"max_messages": 5}},
        "timeout": 4,
        "project_id": "p1",
    }
    write(path, 'api_ur = "typo"\n[channels.x]\nmax_messages = 1\n')
    r = run("config", "list")
    assert r.exit_code == 2 and "unknown key 'api_ur'" in r.stderr


def test_cli_config_set_get_list_unset_path(clean_env: Path) -> None:
    path = clean_env / ".loom" / "config.toml"
    r = run("config", "path")
    assert r.exit_code == 0 and r.stdout.strip() == str(path)
    r = run("config", "set", "api_url", "http://weft.example:9000/")
    assert r.exit_code == 0, r.stderr
    assert tomllib.loads(path.read_text())["api_url"] == "http://weft.example:9000"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    r = run("config", "set", "api_token", "-", input="tok-123\n")
    assert r.exit_code == 0
    assert read_file(path)["api_token"] == "tok-123"
    r = run("config", "get", "api_url")
    assert r.stdout == "http://weft.example:9000\n"
    r = run("config", "get", "api_token")
    assert r.stdout == "***\n"
    r = run("config", "get", "api_token", "--show-secrets")
    assert r.stdout == "tok-123\n"
    r = run("config", "list", "--json")
    doc = json.loads(r.stdout)
    assert doc["settings"]["api_url"] == {"value": "http://weft.example:9000", "source": "file"}
    assert doc["settings"]["api_token"]["value"] == "***"
    assert doc["settings"]["timeout"] == {"value": 10.0, "source": "default"}
    r = run("config", "list")
    assert r.exit_code == 0 and "weft.example" in r.stdout and "tok-123" not in r.stdout
    r = run("config", "unset", "api_token")
    assert r.exit_code == 0 and "api_token" not in read_file(path)
    r = run("config", "get", "api_url", "--json")
    assert json.loads(r.stdout) == {"key": "api_url", "value": "http://weft.example:9000", "source": "file"}
    r = run("--json", "config", "path")
    assert json.loads(r.stdout) == {"path": str(path), "exists": True}


def test_cli_config_env_overrides_and_is_reported(clean_env: Path) -> None:
    run("config", "set", "project_id", "filed")
    r = run("config", "get", "project_id", "--json", env={"LOOM_PROJECT_ID": "envd"})
    assert json.loads(r.stdout) == {"key": "project_id", "value": "envd", "source": "env:LOOM_PROJECT_ID"}
    r = run("config", "set", "project_id", "other", env={"LOOM_PROJECT_ID": "envd"})
    assert r.exit_code == 0 and "LOOM_PROJECT_ID is set and takes precedence" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["config", "set", "colour", "red"], "config: unknown key 'colour'"),
        (["config", "get", "nope"], "config: unknown key 'nope'"),
        (["config", "set", "api_url", "not a url"], "config set: api_url must be an http://"),
        (["config", "set", "timeout", "0"], "config set: timeout must be more than 0"),
        (["config", "set", "project_id", "X_y"], "config set: project_id must be lowercase"),
    ],
)
def test_cli_config_rejects_bad_keys_and_values(clean_env: Path, args: list[str], message: str) -> None:
    r = run(*args)
    assert r.exit_code == 2
    assert r.stderr.startswith("shuttle: error: ") and message in r.stderr
    assert r.stderr.count("\n") == 1
    assert not (clean_env / ".loom" / "config.toml").exists()


def test_cli_config_in_a_broken_file_is_a_usage_error(clean_env: Path) -> None:
    write(clean_env / ".loom" / "config.toml", "[[[")
    r = run("config", "list")
    assert r.exit_code == 2 and "not valid TOML" in r.stderr and "Traceback" not in r.stderr


def test_config_as_subprocess_with_loom_config(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "shuttle.toml"
    r = run_process("config", "set", "timeout", "3", env={"LOOM_CONFIG": str(target), "HOME": str(tmp_path)})
    assert r.exit_code == 0, r.stderr
    assert tomllib.loads(target.read_text()) == {"timeout": 3.0}
    r = run_process("config", "path", env={"LOOM_CONFIG": str(target), "HOME": str(tmp_path)})
    assert r.stdout.strip() == str(target)
