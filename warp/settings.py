"""Warp's own environment settings (identity comes from :mod:`shared.identity`).

Read once at start-up (``warp.cli``); a bad value is a start-up error naming the
variable and the rule, like the identity variables. The fabric-wide ``LOOM_*``
variables (log level, ack wait, replicas) come from :class:`shared.settings.LoomSettings`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from shared.context.trees import TREES_PER_MINUTE
from shared.models import Scope
from shared.names import TOKEN_RULE, InvalidNameError, validate_token
from shared.settings import LoomSettings, SettingsError, load

_OPAQUE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
OPAQUE_ID_RULE = "letters, digits, '_', '.' and '-', 1-128 characters"
FLAG_RULE = "must be a boolean (1/0, true/false, yes/no, on/off)"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class WarpSettingsError(SettingsError):
    """A Warp environment variable is invalid; the message names it."""


def _seconds(value: object, name: str, lo: float, hi: float) -> float:
    try:
        seconds = float(value) if isinstance(value, int | float) else float(str(value).strip())
    except ValueError:
        raise WarpSettingsError("must be a number of seconds", field=name) from None
    if not lo <= seconds <= hi:
        raise WarpSettingsError(f"must be between {lo:g} and {hi:g}", field=name)
    return seconds


def _tokens(value: object, name: str) -> tuple[str, ...]:
    parts = value.split(",") if isinstance(value, str) else value if isinstance(value, Iterable) else [value]
    values: list[str] = []
    for part in parts:
        token = str(part).strip()
        if not token:
            continue
        try:
            values.append(validate_token(token, name))
        except InvalidNameError:
            raise WarpSettingsError(f"each comma-separated value must be {TOKEN_RULE}", field=name) from None
    return tuple(sorted(set(values)))


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


class WarpSettings(LoomSettings):
    """``LOOM_*`` variables of Warp (docs/warp.md, Configuration). An empty or blank
    variable means its default."""

    heartbeat_s: float = Field(default=10.0, validation_alias="LOOM_HEARTBEAT_S")
    capabilities: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), validation_alias="LOOM_CAPABILITIES"
    )
    boundaries: Annotated[tuple[str, ...], NoDecode] = Field(
        default=("default",), validation_alias="LOOM_BOUNDARIES"
    )
    max_concurrent_tasks: int = Field(default=1, validation_alias="LOOM_MAX_CONCURRENT_TASKS")
    scope: Scope = Field(default=Scope.TEAM, validation_alias="LOOM_SCOPE")
    auto_register: bool = Field(default=False, validation_alias="LOOM_AUTO_REGISTER")
    target_id: str | None = Field(default=None, validation_alias="LOOM_TARGET_ID")
    spinup_id: str | None = Field(default=None, validation_alias="LOOM_SPINUP_ID")
    work_id: str | None = Field(default=None, validation_alias="LOOM_WORK_ID")
    op_timeout_s: float = Field(default=10.0, validation_alias="LOOM_WARP_TIMEOUT_S")
    ready_wait_s: float = Field(default=3.0, validation_alias="LOOM_WARP_READY_WAIT_S")
    checkpoint_s: float = Field(default=60.0, validation_alias="LOOM_CHECKPOINT_S")
    context_trees_per_minute: int = Field(
        default=TREES_PER_MINUTE, ge=1, le=100_000, validation_alias="LOOM_CONTEXT_TREES_PER_MINUTE"
    )
    landing_lock_s: float = Field(default=120.0, validation_alias="LOOM_LANDING_LOCK_S")
    agent_protocol: Literal["message", "work", "off"] = Field(
        default="message", validation_alias="LOOM_AGENT_PROTOCOL"
    )
    agent_protocol_capability: str | None = Field(
        default=None, validation_alias="LOOM_AGENT_PROTOCOL_CAPABILITY"
    )
    agent_protocol_wait_s: float = Field(default=600.0, validation_alias="LOOM_AGENT_PROTOCOL_WAIT_S")

    @field_validator("heartbeat_s", mode="before")
    @classmethod
    def _heartbeat(cls, value: object) -> float:
        return 10.0 if _blank(value) else _seconds(value, "LOOM_HEARTBEAT_S", 0.1, 3600)

    @field_validator("op_timeout_s", mode="before")
    @classmethod
    def _op_timeout(cls, value: object) -> float:
        return 10.0 if _blank(value) else _seconds(value, "LOOM_WARP_TIMEOUT_S", 0.5, 600)

    @field_validator("ready_wait_s", mode="before")
    @classmethod
    def _ready_wait(cls, value: object) -> float:
        return 3.0 if _blank(value) else _seconds(value, "LOOM_WARP_READY_WAIT_S", 0, 120)

    @field_validator("checkpoint_s", mode="before")
    @classmethod
    def _checkpoint(cls, value: object) -> float:
        """0 turns the timer off (checkpoints are then taken on progress reports only)."""
        return 60.0 if _blank(value) else _seconds(value, "LOOM_CHECKPOINT_S", 0, 86400)

    @field_validator("landing_lock_s", mode="before")
    @classmethod
    def _landing_lock(cls, value: object) -> float:
        """loom-lander: how long its landing lock outlives the lander's last renewal."""
        return 120.0 if _blank(value) else _seconds(value, "LOOM_LANDING_LOCK_S", 1, 3600)

    @field_validator("agent_protocol_wait_s", mode="before")
    @classmethod
    def _protocol_wait(cls, value: object) -> float:
        """How long a prompt of the agent protocol waits for the agent's answer (docs/interop.md)."""
        return 600.0 if _blank(value) else _seconds(value, "LOOM_AGENT_PROTOCOL_WAIT_S", 1, 86400)

    @field_validator("capabilities", mode="before")
    @classmethod
    def _capabilities(cls, value: object) -> tuple[str, ...]:
        return () if _blank(value) else _tokens(value, "LOOM_CAPABILITIES")

    @field_validator("boundaries", mode="before")
    @classmethod
    def _boundaries(cls, value: object) -> tuple[str, ...]:
        return ("default",) if _blank(value) else _tokens(value, "LOOM_BOUNDARIES")

    @field_validator("max_concurrent_tasks", mode="before")
    @classmethod
    def _max_tasks(cls, value: object) -> int:
        if _blank(value):
            return 1
        raw = str(value).strip()
        if isinstance(value, bool) or not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 1000:
            raise WarpSettingsError("must be an integer from 1 to 1000", field="LOOM_MAX_CONCURRENT_TASKS")
        return int(raw)

    @field_validator("scope", mode="before")
    @classmethod
    def _scope(cls, value: object) -> Scope:
        raw = Scope.TEAM.value if _blank(value) else str(value).strip().lower()
        try:
            return Scope(raw)
        except ValueError:
            choices = ", ".join(s.value for s in Scope)
            raise WarpSettingsError(f"must be one of {choices}", field="LOOM_SCOPE") from None

    @field_validator("auto_register", mode="before")
    @classmethod
    def _flag(cls, value: object) -> bool:
        if isinstance(value, bool):
            return value
        raw = "" if value is None else str(value).strip().lower()
        if raw in _FALSE or raw in _TRUE:
            return raw in _TRUE
        raise WarpSettingsError(FLAG_RULE, field="LOOM_AUTO_REGISTER")

    @field_validator("agent_protocol", mode="before")
    @classmethod
    def _protocol(cls, value: object) -> str:
        """How a prompt of the agent protocol reaches the fleet (docs/interop.md): a direct
        message to this agent (``message``; also on, true), a work item of the project
        (``work``), or not at all (``off``; also false)."""
        if isinstance(value, bool):
            return "message" if value else "off"
        raw = "" if value is None else str(value).strip().lower()
        if raw in ("", "message", *_TRUE):  # blank: the default
            return "message"
        if raw == "work":
            return "work"
        if raw in _FALSE:
            return "off"
        raise WarpSettingsError("must be message, work or off", field="LOOM_AGENT_PROTOCOL")

    def work_capability(self) -> str | None:
        """The capability of a prompt made a work item: the one set, else the agent's first."""
        return self.agent_protocol_capability or next(iter(self.capabilities), None)

    @field_validator("agent_protocol_capability", mode="before")
    @classmethod
    def _protocol_capability(cls, value: object) -> str | None:
        """The capability of a prompt made a work item (default: the agent's first one)."""
        if _blank(value):
            return None
        try:
            return validate_token(str(value).strip(), "LOOM_AGENT_PROTOCOL_CAPABILITY")
        except InvalidNameError:
            raise WarpSettingsError(f"must be {TOKEN_RULE}", field="LOOM_AGENT_PROTOCOL_CAPABILITY") from None

    @field_validator("target_id", "spinup_id", "work_id", mode="before")
    @classmethod
    def _opaque(cls, value: object, info: ValidationInfo) -> str | None:
        if _blank(value):
            return None
        raw = str(value).strip()
        if _OPAQUE_ID.fullmatch(raw) is None:
            name = f"LOOM_{(info.field_name or '').upper()}"  # LOOM_TARGET_ID, LOOM_SPINUP_ID, LOOM_WORK_ID
            raise WarpSettingsError(f"must be {OPAQUE_ID_RULE}", field=name)
        return raw


def load_warp_settings(env: Mapping[str, str] | None = None) -> WarpSettings:
    """Warp's settings from the environment, or from ``env`` alone (to check an environment
    before it is handed to Warp); every bad value is one :class:`WarpSettingsError`."""
    settings = load(WarpSettings, env, error=WarpSettingsError)
    if settings.agent_protocol == "work" and settings.work_capability() is None:
        raise WarpSettingsError(
            "is needed when LOOM_AGENT_PROTOCOL is work and LOOM_CAPABILITIES is empty "
            "(the capability of a prompt made a work item)",
            field="LOOM_AGENT_PROTOCOL_CAPABILITY",
        )
    return settings
