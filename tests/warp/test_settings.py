"""Warp's environment settings (warp.settings)."""

from __future__ import annotations

import pytest

from shared.models import Scope
from warp.settings import WarpSettingsError, load_warp_settings


def test_defaults() -> None:
    s = load_warp_settings({})
    assert s.heartbeat_s == 10.0
    assert s.capabilities == ()
    assert s.boundaries == ("default",)
    assert s.max_concurrent_tasks == 1
    assert s.scope is Scope.TEAM
    assert s.auto_register is False
    assert s.target_id is None and s.spinup_id is None and s.work_id is None


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
        }
    )
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
        ("LOOM_TARGET_ID", "has space", "must be"),
        ("LOOM_LOG_LEVEL", "loud", "must be one of"),
        ("LOOM_WARP_TIMEOUT_S", "0.1", "between"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, expected: str) -> None:
    with pytest.raises(WarpSettingsError) as info:
        load_warp_settings({name: value})
    assert str(info.value).startswith(f"{name}:")
    assert expected in str(info.value)
    if len(value) > 3:  # the rejected value is not repeated
        assert value not in str(info.value).removeprefix(f"{name}:")
