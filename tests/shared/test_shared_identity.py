"""Identity (docs/architecture.md, Identity and isolation): derived, stable, overridable, always valid."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from shared.identity import (
    Identity,
    IdentityError,
    default_handle,
    load_settings,
    project_id_for_path,
    resolve_identity,
    spun_up_handle,
    user_id_for,
)
from shared.names import (
    AGENT_ID_RULE,
    HANDLE_RULE,
    PROJECT_ID_RULE,
    validate_agent_id,
    validate_handle,
    validate_user_id,
)

OVERRIDE = "abcdefabcdefabcdefabcdefabcdef12"


def _resolve(cwd: Path, hostname: str = "host-a") -> Identity:
    return resolve_identity(load_settings(), hostname=hostname, cwd=cwd)


def test_same_host_and_path_give_the_same_agent_id(tmp_path: Path) -> None:
    first, second = _resolve(tmp_path), _resolve(tmp_path)
    assert first.agent_id == second.agent_id
    validate_agent_id(first.agent_id)
    # a different spelling of the same folder is the same folder
    assert _resolve(tmp_path / "sub" / "..").agent_id == first.agent_id


def test_different_path_or_host_gives_a_different_agent_id(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _resolve(tmp_path / "a")
    assert _resolve(tmp_path / "b").agent_id != a.agent_id
    assert _resolve(tmp_path / "a", hostname="host-b").agent_id != a.agent_id


def test_default_project_id_is_sha256_of_the_absolute_path(tmp_path: Path) -> None:
    expected = hashlib.sha256(str(tmp_path.resolve()).encode()).hexdigest()[:16]
    assert _resolve(tmp_path).project_id == expected == project_id_for_path(tmp_path)
    assert _resolve(tmp_path).project_path == tmp_path.resolve()


def test_default_project_path_is_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_identity(load_settings(), hostname="h").project_path == tmp_path.resolve()


@pytest.mark.parametrize("variable", ["LOOM_AGENT_ID", "LOOMINAL_AGENT_ID"])
def test_agent_id_override_wins(variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, OVERRIDE)
    identity = _resolve(tmp_path)
    assert identity.agent_id == identity.base_agent_id == OVERRIDE


def test_loom_agent_id_wins_over_its_alias(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_AGENT_ID", OVERRIDE)
    monkeypatch.setenv("LOOMINAL_AGENT_ID", "1" * 32)
    assert _resolve(tmp_path).agent_id == OVERRIDE


@pytest.mark.parametrize("variable", ["LOOM_PROJECT_ID", "LOOMINAL_PROJECT_ID"])
def test_project_id_from_env(variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, "team-x")
    assert _resolve(tmp_path).project_id == "team-x"


def test_loom_project_id_wins_over_its_alias(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_PROJECT_ID", "first")
    monkeypatch.setenv("LOOMINAL_PROJECT_ID", "second")
    assert _resolve(tmp_path).project_id == "first"


@pytest.mark.parametrize("variable", ["LOOM_PROJECT_PATH", "MCP_PROJECT_PATH"])
def test_project_path_from_env(variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    monkeypatch.setenv(variable, str(project))
    identity = _resolve(tmp_path)  # cwd is elsewhere: the variable wins
    assert identity.project_path == project.resolve()
    assert identity.project_id == project_id_for_path(project)
    assert identity.agent_id == _resolve(project).agent_id


def test_empty_variables_mean_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (
        "LOOM_PROJECT_ID",
        "LOOM_AGENT_ID",
        "LOOM_HANDLE",
        "LOOM_SUBAGENT_TYPE",
        "LOOM_INSTANCE",
        "LOOM_AGENT_TYPE",
        "LOOM_USER_ID",
        "LOOM_PROJECT_PATH",
    ):
        monkeypatch.setenv(variable, "")
    identity = _resolve(tmp_path)
    assert identity.project_id == project_id_for_path(tmp_path)
    assert identity.project_path == tmp_path.resolve()
    assert not identity.is_subagent
    assert identity.instance == 0 and identity.agent_type == "generic"


def test_empty_primary_variable_lets_the_alias_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOM_PROJECT_ID", "")
    monkeypatch.setenv("LOOMINAL_PROJECT_ID", "from-alias")
    assert _resolve(tmp_path).project_id == "from-alias"
    monkeypatch.setenv("LOOMINAL_PROJECT_ID", "Bad_Alias")
    with pytest.raises(IdentityError, match="LOOMINAL_PROJECT_ID"):
        load_settings()


@pytest.mark.parametrize("value", ["Bad_Project", "-x", "a.b", "x" * 64])
@pytest.mark.parametrize("variable", ["LOOM_PROJECT_ID", "LOOMINAL_PROJECT_ID"])
def test_invalid_project_id_is_an_error_naming_the_variable_and_rule(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(IdentityError) as info:
        load_settings()
    message = str(info.value)
    assert variable in message and PROJECT_ID_RULE in message, message
    with pytest.raises(IdentityError):
        resolve_identity()  # the same check when settings are loaded implicitly


@pytest.mark.parametrize(
    ("variable", "value", "rule"),
    [
        ("LOOM_AGENT_ID", "not-hex", AGENT_ID_RULE),
        ("LOOMINAL_AGENT_ID", "ABCDEF" * 6, AGENT_ID_RULE),
        ("LOOM_HANDLE", "Has Spaces", HANDLE_RULE),
        ("LOOM_SUBAGENT_TYPE", "bad.type", "lowercase letters"),
        ("LOOM_AGENT_TYPE", "*", "lowercase letters"),
        ("LOOM_USER_ID", "nothex", "16 lowercase hex"),
        ("LOOM_INSTANCE", "abc", "integer"),
        ("LOOM_INSTANCE", "1000", "999"),
    ],
)
def test_other_invalid_identity_variables(
    variable: str, value: str, rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(IdentityError) as info:
        load_settings()
    message = str(info.value)
    assert variable in message and rule in message, message


def test_subagent_has_its_own_id_and_records_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = _resolve(tmp_path)
    monkeypatch.setenv("LOOM_SUBAGENT_TYPE", "reviewer")
    child = _resolve(tmp_path)
    assert child.is_subagent and not parent.is_subagent
    assert child.agent_id != parent.agent_id
    assert child.parent_id == parent.agent_id
    assert child.subagent_type == "reviewer"
    validate_agent_id(child.agent_id)
    assert _resolve(tmp_path).agent_id == child.agent_id  # stable too
    monkeypatch.setenv("LOOM_SUBAGENT_TYPE", "tester")
    assert _resolve(tmp_path).agent_id not in (child.agent_id, parent.agent_id)


def test_subagent_of_an_overridden_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_AGENT_ID", OVERRIDE)
    monkeypatch.setenv("LOOM_SUBAGENT_TYPE", "reviewer")
    child = _resolve(tmp_path)
    assert child.parent_id == OVERRIDE and child.agent_id != OVERRIDE


def test_instances_differ_and_are_valid(tmp_path: Path) -> None:
    base = _resolve(tmp_path)
    instances = [base.with_instance(n) for n in range(4)]
    assert instances[0].agent_id == base.agent_id
    ids = {i.agent_id for i in instances}
    assert len(ids) == 4
    for ident in instances:
        validate_agent_id(ident.agent_id)
        assert ident.base_agent_id == base.agent_id
        assert ident.project_id == base.project_id
    assert base.with_instance(2).agent_id == base.with_instance(2).agent_id


def test_instance_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _resolve(tmp_path)
    monkeypatch.setenv("LOOM_INSTANCE", "3")
    third = _resolve(tmp_path)
    assert third.instance == 3
    assert third.agent_id == base.with_instance(3).agent_id != base.agent_id


def test_subagent_instances_differ_per_parent_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOM_SUBAGENT_TYPE", "reviewer")
    child = _resolve(tmp_path)
    other = child.with_instance(1)
    assert other.agent_id != child.agent_id
    assert other.parent_id is not None and other.parent_id != child.parent_id
    validate_agent_id(other.agent_id)
    validate_agent_id(other.parent_id)


@pytest.mark.parametrize(
    ("hostname", "folder"),
    [
        ("My_Host.Example.COM", "Über Projekt!!"),
        ("---", "..."),
        ("", ""),
        ("ホスト", "プロジェクト"),
        ("h" * 200, "f" * 200),
        ("a" * 63 + "-b", "c"),  # truncation lands right after a '-'
        ("host", "my--repo__v2"),
        ("192.168.1.10", "repo"),
    ],
)
def test_default_handle_is_valid_for_odd_names(hostname: str, folder: str, tmp_path: Path) -> None:
    handle = default_handle(hostname, tmp_path / folder if folder else Path("/"))
    validate_handle(handle)
    assert not handle.startswith("-") and not handle.endswith("-")
    assert "--" not in handle


def test_default_handle_is_readable() -> None:
    assert default_handle("devbox.corp.example", Path("/src/My Repo")) == "devbox-my-repo"


def test_handle_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_HANDLE", "alice-bot")
    assert _resolve(tmp_path).handle == "alice-bot"
    monkeypatch.delenv("LOOM_HANDLE")
    assert _resolve(tmp_path, hostname="odd_HOST").handle == default_handle("odd_HOST", tmp_path)


def test_user_id_is_stable_and_overridable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _resolve(tmp_path)
    assert first.user_id == _resolve(tmp_path / "..").user_id  # same user, any project
    monkeypatch.setenv("LOOM_USER_ID", "00112233445566ff")
    assert _resolve(tmp_path).user_id == "00112233445566ff"


def test_user_without_a_passwd_entry_still_gets_an_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Containers run as an arbitrary uid often have no name for it; getpass then raises."""
    import getpass

    def no_name() -> str:
        raise KeyError("getpwuid(): uid not found: 1000123")

    monkeypatch.setattr(getpass, "getuser", no_name)
    identity = _resolve(tmp_path)
    validate_user_id(identity.user_id)
    assert identity.user_id == user_id_for(f"uid-{os.getuid()}")


@pytest.mark.parametrize("target_name", ["vm-loom", "VM_Loom.local", "---", "t" * 200, "ホスト"])
def test_spun_up_handles_tell_one_targets_agents_apart(target_name: str) -> None:
    first, second = (spun_up_handle(target_name, agent_id) for agent_id in ("ab12cd34" * 4, "ef56ab78" * 4))
    for handle in (first, second):
        validate_handle(handle)
        assert "--" not in handle and not handle.startswith("-")
    assert first != second and first.endswith("-ab12cd34") and second.endswith("-ef56ab78")
    assert spun_up_handle("vm-loom", "ab12cd34" * 4) == "vm-loom-ab12cd34"
