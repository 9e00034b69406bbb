"""Warp's environment settings (warp.settings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shared.errors import Invalid
from shared.models import Scope
from shared.settings import LoomSettings
from warp.settings import WarpSettingsError, load_warp_settings

WARP = str(Path(sys.executable).parent / "warp")
SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="


def test_defaults() -> None:
    s = load_warp_settings({})
    assert s.heartbeat_s == 10.0
    assert s.capabilities == ()
    assert s.boundaries == ("default",)
    assert s.max_concurrent_tasks == 1
    assert s.scope is Scope.TEAM
    assert s.auto_register is False
    assert s.target_id is None and s.spinup_id is None and s.work_id is None
    assert s.agent_protocol == "message" and s.agent_protocol_wait_s == 600  # docs/interop.md


def test_values_from_env() -> None:
    s = load_warp_settings(
        {
            "LOOM_HEARTBEAT_S": "0.5",
            "LOOM_CAPABILITIES": "review, code,code",
            "LOOM_BOUNDARIES": "corporate,default",
            "LOOM_MAX_CONCURRENT_TASKS": "3",
            "LOOM_SCOPE": "Public",
            "LOOM_AUTO_REGISTER": "yes",
            "LOOM_TARGET_ID": "t-123",
            "LOOM_SPINUP_ID": "a" * 32,
            "LOOM_WORK_ID": "b" * 32,
            "LOOM_LOG_LEVEL": "debug",
            "LOOM_AGENT_PROTOCOL": "Work",
            "LOOM_AGENT_PROTOCOL_WAIT_S": "30",
        }
    )
    assert (s.agent_protocol, s.work_capability(), s.agent_protocol_wait_s) == ("work", "code", 30)
    assert s.heartbeat_s == 0.5
    assert s.capabilities == ("code", "review")
    assert s.boundaries == ("corporate", "default")
    assert s.max_concurrent_tasks == 3
    assert s.scope is Scope.PUBLIC
    assert s.auto_register is True
    assert (s.target_id, s.spinup_id, s.work_id) == ("t-123", "a" * 32, "b" * 32)
    assert s.log_level == "DEBUG"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("LOOM_HEARTBEAT_S", "fast", "must be a number"),
        ("LOOM_HEARTBEAT_S", "0", "between"),
        ("LOOM_CAPABILITIES", "code,Bad Cap", "each comma-separated value must be"),
        ("LOOM_BOUNDARIES", "a.b", "must be lowercase letters"),
        ("LOOM_MAX_CONCURRENT_TASKS", "0", "integer from 1 to 1000"),
        ("LOOM_MAX_CONCURRENT_TASKS", "two", "integer from 1 to 1000"),
        ("LOOM_SCOPE", "world", "must be one of"),
        ("LOOM_AUTO_REGISTER", "maybe", "must be a boolean"),
        ("LOOM_AGENT_PROTOCOL", "perhaps", "must be message, work or off"),
        ("LOOM_AGENT_PROTOCOL_CAPABILITY", "Bad Cap", "must be lowercase letters"),
        ("LOOM_AGENT_PROTOCOL_WAIT_S", "0", "between"),
        ("LOOM_AGENT_PROTOCOL_WAIT_S", "forever", "must be a number"),
        ("LOOM_TARGET_ID", "has space", "must be"),
        ("LOOM_LOG_LEVEL", "loud", "must be one of"),
        ("LOOM_WARP_TIMEOUT_S", "0.1", "between"),
        ("LOOM_JS_REPLICAS", "many", "integer from 1 to 5"),
        ("LOOM_WORK_ACK_WAIT_S", "soon", "number of seconds from 0.5 to 86400"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, expected: str) -> None:
    with pytest.raises(WarpSettingsError) as info:
        load_warp_settings({name: value})
    assert str(info.value).startswith(f"{name}:")
    assert expected in str(info.value)
    if len(value) > 3:  # the rejected value is not repeated
        assert value not in str(info.value).removeprefix(f"{name}:")


@pytest.mark.parametrize(
    ("given", "mode"), [("on", "message"), ("", "message"), ("false", "off"), ("off", "off")]
)
def test_the_agent_protocol_is_served_by_message_unless_turned_off(given: str, mode: str) -> None:
    assert load_warp_settings({"LOOM_AGENT_PROTOCOL": given}).agent_protocol == mode


def test_prompts_as_work_need_a_capability() -> None:
    with pytest.raises(WarpSettingsError) as info:
        load_warp_settings({"LOOM_AGENT_PROTOCOL": "work"})
    assert str(info.value).startswith("LOOM_AGENT_PROTOCOL_CAPABILITY: is needed when")
    chosen = load_warp_settings({"LOOM_AGENT_PROTOCOL": "work", "LOOM_AGENT_PROTOCOL_CAPABILITY": "ask"})
    assert chosen.work_capability() == "ask"


def test_the_shared_variables_are_the_shared_settings() -> None:
    s = load_warp_settings({"LOOM_JS_REPLICAS": "3", "LOOM_WORK_ACK_WAIT_S": "2.5", "LOOM_NATS_SERVER": ""})
    assert isinstance(s, LoomSettings)
    assert (s.js_replicas, s.work_ack_wait_s, s.log_level, s.nats_server) == (3, 2.5, "INFO", None)


def test_a_bad_setting_is_an_invalid_loom_error() -> None:
    with pytest.raises(Invalid) as info:
        load_warp_settings({"LOOM_HEARTBEAT_S": SECRET})
    assert info.value.code == "invalid" and SECRET not in str(info.value)


def test_a_given_environment_is_read_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a launcher checks is what it hands Warp, not its own environment."""
    monkeypatch.setenv("LOOM_CAPABILITIES", "review")
    monkeypatch.setenv("LOOM_JS_REPLICAS", "many")
    s = load_warp_settings({"LOOM_BOUNDARIES": "corp"})
    assert (s.capabilities, s.boundaries, s.js_replicas) == ((), ("corp",), 1)
    with pytest.raises(WarpSettingsError, match="LOOM_JS_REPLICAS"):
        load_warp_settings()  # without one: the process's environment


@pytest.mark.parametrize(
    ("variable", "rule"),
    [
        ("LOOM_JS_REPLICAS", "must be an integer from 1 to 5"),
        ("LOOM_WORK_ACK_WAIT_S", "must be a number of seconds from 0.5 to 86400"),
        ("LOOM_LOG_LEVEL", "must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("NATS_URL", "must use one of the schemes nats://, tls://, ws://, wss://"),  # no "Value error,"
    ],
)
def test_warp_refuses_a_bad_shared_setting_at_start(tmp_path: Path, variable: str, rule: str) -> None:
    env = {"HOME": str(tmp_path), "LOOM_PROJECT_PATH": str(tmp_path), variable: SECRET}
    done = subprocess.run(
        [WARP], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip() == f"warp: {variable}: {rule}"
