"""Warp's own environment settings (identity comes from :mod:`shared.identity`).

Read once at start-up; a bad value is a start-up error naming the variable and
the rule, like the identity variables.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from shared.errors import Invalid
from shared.models import Scope
from shared.names import TOKEN_RULE, InvalidNameError, validate_token

_OPAQUE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
OPAQUE_ID_RULE = "letters, digits, '_', '.' and '-', 1-128 characters"


class WarpSettingsError(Invalid, ValueError):
    """A Warp environment variable is invalid; the message names it."""


@dataclass(frozen=True)
class WarpSettings:
    heartbeat_s: float = 10.0
    capabilities: tuple[str, ...] = ()
    boundaries: tuple[str, ...] = ("default",)
    max_concurrent_tasks: int = 1
    scope: Scope = Scope.TEAM
    auto_register: bool = False
    target_id: str | None = None
    spinup_id: str | None = None
    work_id: str | None = None
    op_timeout_s: float = 10.0
    ready_wait_s: float = 3.0
    log_level: str = "INFO"


def _number(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise WarpSettingsError(f"{name}: must be a number of seconds") from None
    if not lo <= value <= hi:
        raise WarpSettingsError(f"{name}: must be between {lo:g} and {hi:g}")
    return value


def _tokens(env: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    values: list[str] = []
    for part in raw.split(","):
        token = part.strip()
        if not token:
            continue
        try:
            values.append(validate_token(token, name))
        except InvalidNameError:
            raise WarpSettingsError(f"{name}: each comma-separated value must be {TOKEN_RULE}") from None
    return tuple(sorted(set(values)))


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise WarpSettingsError(f"{name}: must be a boolean (1/0, true/false, yes/no, on/off)")


def _opaque(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if _OPAQUE_ID.fullmatch(raw) is None:
        raise WarpSettingsError(f"{name}: must be {OPAQUE_ID_RULE}")
    return raw


def load_warp_settings(env: Mapping[str, str] | None = None) -> WarpSettings:
    e = os.environ if env is None else env
    raw_max = e.get("LOOM_MAX_CONCURRENT_TASKS", "").strip()
    max_tasks = 1
    if raw_max:
        if not raw_max.isdigit() or not 1 <= int(raw_max) <= 1000:
            raise WarpSettingsError("LOOM_MAX_CONCURRENT_TASKS: must be an integer from 1 to 1000")
        max_tasks = int(raw_max)
    raw_scope = e.get("LOOM_SCOPE", "").strip().lower() or Scope.TEAM.value
    try:
        scope = Scope(raw_scope)
    except ValueError:
        choices = ", ".join(s.value for s in Scope)
        raise WarpSettingsError(f"LOOM_SCOPE: must be one of {choices}") from None
    level = e.get("LOOM_LOG_LEVEL", "").strip().upper() or "INFO"
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise WarpSettingsError("LOOM_LOG_LEVEL: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return WarpSettings(
        heartbeat_s=_number(e, "LOOM_HEARTBEAT_S", 10.0, 0.1, 3600),
        capabilities=_tokens(e, "LOOM_CAPABILITIES", ()),
        boundaries=_tokens(e, "LOOM_BOUNDARIES", ("default",)),
        max_concurrent_tasks=max_tasks,
        scope=scope,
        auto_register=_flag(e, "LOOM_AUTO_REGISTER"),
        target_id=_opaque(e, "LOOM_TARGET_ID"),
        spinup_id=_opaque(e, "LOOM_SPINUP_ID"),
        work_id=_opaque(e, "LOOM_WORK_ID"),
        op_timeout_s=_number(e, "LOOM_WARP_TIMEOUT_S", 10.0, 0.5, 600),
        ready_wait_s=_number(e, "LOOM_WARP_READY_WAIT_S", 3.0, 0, 120),
        log_level=level,
    )
