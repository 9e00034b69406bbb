"""The TypeScript Loom's settings: read with their meaning, or refused naming ours (shared/legacy.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared import legacy
from shared.identity import IdentityError, load_settings, resolve_identity
from shared.legacy import LegacySettingError, adopt_environment, apply_environment, check_warp_files

SECRET = "tok-9Zq+SeCrEt/42="


def refusal(parts: list[legacy.Part], env: dict[str, str]) -> str:
    with pytest.raises(LegacySettingError) as err:
        adopt_environment(parts, env)
    assert SECRET not in str(err.value)
    return str(err.value)


def test_translated_variables_keep_the_originals_meaning() -> None:
    cases: list[tuple[legacy.Part, dict[str, str], dict[str, str]]] = [
        ("warp", {"LOG_LEVEL": "warn"}, {"LOOM_LOG_LEVEL": "WARNING"}),
        ("warp", {"WORKQUEUE_ACK_TIMEOUT": "300000"}, {"LOOM_WORK_ACK_WAIT_S": "300"}),
        ("warp", {"WORKQUEUE_ACK_TIMEOUT": "1500"}, {"LOOM_WORK_ACK_WAIT_S": "1.5"}),
        ("warp", {"LOG_FORMAT": "text"}, {}),
        ("weft", {"API_PORT": "3000", "API_HOST": "0.0.0.0"}, {"WEFT_PORT": "3000", "WEFT_HOST": "0.0.0.0"}),
        ("weft", {"API_TOKENS": SECRET}, {"WEFT_API_TOKENS": SECRET}),
        ("weft", {"LOG_LEVEL": "info"}, {"WEFT_LOG_LEVEL": "INFO"}),
        ("pattern", {"DEBUG": "true"}, {"LOOM_LOG_LEVEL": "DEBUG"}),
        ("pattern", {"DEBUG": "false"}, {}),
        ("pattern", {"PATTERN_DISABLE_CONTENT_SCAN": "true"}, {"PATTERN_SECRET_SCAN": "off"}),
        ("pattern", {"PATTERN_DISABLE_CONTENT_SCAN": "false"}, {"PATTERN_SECRET_SCAN": "warn"}),
        ("pattern", {"PATTERN_CONTENT_SCANNING": "false"}, {"PATTERN_SECRET_SCAN": "off"}),
        ("pattern", {"PATTERN_CONTENT_SCANNING": "true"}, {"PATTERN_SECRET_SCAN": "warn"}),
    ]
    for part, env, updates in cases:
        adoption = adopt_environment([part], env)
        assert adoption.updates == updates, (part, env)
        for name in env:
            if updates:
                assert any(note.startswith(name) and "rename it" in note for note in adoption.notices)
        assert not any(SECRET in note for note in adoption.notices)


def test_a_variable_applies_only_to_the_parts_that_had_it() -> None:
    assert adopt_environment(["pattern"], {"API_TOKENS": SECRET, "WORKQUEUE_MAX_ATTEMPTS": "5"}).updates == {}
    assert adopt_environment(["warp"], {"PATTERN_ENCRYPTION_KEY": SECRET}).updates == {}


def test_what_cannot_be_honoured_is_refused_naming_what_to_use() -> None:
    message = refusal(["warp"], {"WORKQUEUE_MAX_ATTEMPTS": "5", "WORKQUEUE_DLQ_TTL": "1"})
    assert "WORKQUEUE_MAX_ATTEMPTS" in message and "max_attempts" in message
    assert "WORKQUEUE_DLQ_TTL" in message and "30 days" in message
    assert "IDLE_TIMEOUT_MS" in refusal(["weft"], {"IDLE_TIMEOUT_MS": "300000"})
    assert "idle_timeout_s" in refusal(["weft"], {"IDLE_TIMEOUT_MS": "300000"})
    message = refusal(["pattern"], {"PATTERN_ENCRYPTION_KEY": SECRET})
    assert "PATTERN_ENCRYPTION_KEY" in message and "encrypt" in message
    assert "LOG_FORMAT" in refusal(["warp"], {"LOG_FORMAT": "json"})


def test_unreadable_values_name_the_variable_and_the_rule() -> None:
    for part, env, words in (
        ("warp", {"LOG_LEVEL": SECRET}, "LOG_LEVEL: must be one of"),
        (
            "warp",
            {"WORKQUEUE_ACK_TIMEOUT": "5s"},
            "WORKQUEUE_ACK_TIMEOUT: must be a whole number of milliseconds",
        ),
        ("weft", {"API_PORT": "70000"}, "API_PORT: must be a port number"),
        (
            "pattern",
            {"PATTERN_DISABLE_CONTENT_SCAN": SECRET},
            "PATTERN_DISABLE_CONTENT_SCAN: must be true or false",
        ),
    ):
        assert words in refusal([part], env)  # type: ignore[list-item]


def test_old_and_new_names_that_disagree_are_refused() -> None:
    message = refusal(["warp"], {"LOOMINAL_SUBAGENT_TYPE": "explore", "LOOM_SUBAGENT_TYPE": "plan"})
    assert (
        "LOOMINAL_SUBAGENT_TYPE and LOOM_SUBAGENT_TYPE" in message
        and "keep only LOOM_SUBAGENT_TYPE" in message
    )
    assert "explore" not in message and "plan" not in message
    message = refusal(["pattern"], {"PATTERN_DISABLE_CONTENT_SCAN": "true", "PATTERN_SECRET_SCAN": "block"})
    assert "PATTERN_DISABLE_CONTENT_SCAN and PATTERN_SECRET_SCAN" in message
    # two of the original's names for one of ours (warp --with-memory reads both parts)
    assert "LOG_LEVEL and DEBUG" in refusal(["warp", "pattern"], {"LOG_LEVEL": "INFO", "DEBUG": "true"})
    assert "API_TOKENS and WEFT_API_TOKENS" in refusal(
        ["weft"], {"API_TOKENS": SECRET, "WEFT_API_TOKENS": "x"}
    )
    assert "PROJECT_ID and LOOM_PROJECT_ID" in refusal(
        ["shuttle"], {"PROJECT_ID": "a", "LOOM_PROJECT_ID": "b"}
    )
    # agreeing (the same value, or the same number written differently) is fine, and ours stays
    agreed = adopt_environment(
        ["warp"],
        {
            "LOOMINAL_AGENT_ID": "a" * 32,
            "LOOM_AGENT_ID": "a" * 32,
            "WORKQUEUE_ACK_TIMEOUT": "60000",
            "LOOM_WORK_ACK_WAIT_S": "60.0",
        },
    )
    assert agreed.updates == {}


def test_not_read_variables_are_said_so() -> None:
    adoption = adopt_environment(["weft"], {"NODE_ENV": "development"})
    assert adoption.updates == {} and any("NODE_ENV is not read" in note for note in adoption.notices)


def test_apply_sets_ours_only_when_ours_is_unset() -> None:
    env = {"API_PORT": "3000"}
    notices = apply_environment(["weft"], env)
    assert env["WEFT_PORT"] == "3000" and notices
    env = {"API_PORT": "3000", "WEFT_PORT": "3000"}
    apply_environment(["weft"], env)
    assert env == {"API_PORT": "3000", "WEFT_PORT": "3000"}


def test_loominal_subagent_type_makes_a_subagent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOOMINAL_AGENT_ID", "c" * 32)
    monkeypatch.setenv("LOOMINAL_SUBAGENT_TYPE", "explore")
    monkeypatch.delenv("LOOM_AGENT_ID", raising=False)
    monkeypatch.delenv("LOOM_SUBAGENT_TYPE", raising=False)
    identity = resolve_identity(load_settings(), hostname="h", cwd=tmp_path)
    assert identity.is_subagent and identity.parent_id == "c" * 32 and identity.agent_id != "c" * 32
    assert identity.subagent_type == "explore"
    monkeypatch.setenv("LOOMINAL_SUBAGENT_TYPE", "Not A Type")
    with pytest.raises(IdentityError) as err:
        load_settings()
    assert "LOOMINAL_SUBAGENT_TYPE (alias of LOOM_SUBAGENT_TYPE)" in str(err.value)
    assert "Not A Type" not in str(err.value)


@pytest.mark.parametrize("alias", ["LOOMINAL_PROJECT_ID", "NATS_PROJECT_ID"])
def test_each_original_project_id_name_is_read_as_the_project(
    alias: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("LOOM_PROJECT_ID", "LOOMINAL_PROJECT_ID", "NATS_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(alias, "team-a")
    assert resolve_identity(load_settings(), hostname="h", cwd=tmp_path).project_id == "team-a"
    monkeypatch.setenv(alias, "Not_A_Project")
    with pytest.raises(IdentityError) as err:
        load_settings()
    assert f"{alias} (alias of LOOM_PROJECT_ID)" in str(err.value)
    assert "Not_A_Project" not in str(err.value)


def test_two_original_project_ids_that_disagree_are_refused() -> None:
    message = refusal(["warp"], {"NATS_PROJECT_ID": "team-a", "LOOMINAL_PROJECT_ID": "team-b"})
    assert (
        "NATS_PROJECT_ID and LOOMINAL_PROJECT_ID" in message
        or "LOOMINAL_PROJECT_ID and NATS_PROJECT_ID" in message
    )
    assert "team-a" not in message and "team-b" not in message
    assert adopt_environment(["warp"], {"NATS_PROJECT_ID": "team-a", "LOOM_PROJECT_ID": "team-a"}).notices


def test_the_original_warps_files_stop_start_up(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "repo" / "sub"
    project.mkdir(parents=True)
    home.mkdir()
    check_warp_files(project, home)  # nothing there
    # another tool's file of the same name is not ours to judge
    (tmp_path / "repo" / ".mcp-config.json").write_text('{"servers": [], "logging": {"level": "INFO"}}')
    check_warp_files(project, home)
    (tmp_path / "repo" / ".loominal-config.json").write_text(json.dumps({"channels": [{"name": "x"}]}))
    with pytest.raises(LegacySettingError) as err:
        check_warp_files(project, home)
    assert ".loominal-config.json" in str(err.value) and ".loom/config.json" in str(err.value)
    (tmp_path / "repo" / ".loominal-config.json").unlink()
    (home / ".nats-mcp").mkdir()
    (home / ".nats-mcp" / "config.json").write_text(json.dumps({"natsUrl": "nats://x"}))
    with pytest.raises(LegacySettingError) as err:
        check_warp_files(project, home)
    assert ".nats-mcp" in str(err.value)


def test_advice_names_ours() -> None:
    assert legacy.argument_advice("pattern_forget", "memoryId") == (
        "memoryId: this is the TypeScript Pattern's name; use memory_id"
    )
    assert legacy.argument_advice("pattern_forget", "memory_id") is None
    assert "use agent_type" in str(legacy.argument_advice("warp_registry_register", "agentType"))
    assert "use pattern_remember" in str(legacy.tool_advice("remember"))
    assert "use warp_registry_register" in str(legacy.tool_advice("register_agent"))
    assert legacy.tool_advice("warp_handle_get") is None
    assert "1 (low) to 10 (high)" in str(legacy.metadata_advice("priority"))
    assert "use api_url" in str(legacy.shuttle_key_advice("apiUrl"))
    assert "X-Loom-Project" in str(legacy.rest_advice("projectId"))
