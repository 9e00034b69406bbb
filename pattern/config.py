"""Pattern settings (environment) and limits.

Limits are plain data so tests can shrink them; the environment only
controls behaviour an operator may want to change (TTL for tests, secret
scanning, where exports may be written). The ``LOOM_*`` variables every part
shares (replicas, log level) come from :class:`shared.settings.LoomSettings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from pattern.importance import ImportancePolicy, parse_weights
from shared.settings import EnvSettings, LoomSettings, SettingsError, load

DAY_S = 24 * 3600


class SecretScanMode(StrEnum):
    WARN = "warn"
    BLOCK = "block"
    OFF = "off"


_SCAN_ALIASES = {
    "": SecretScanMode.WARN,
    "1": SecretScanMode.WARN,
    "true": SecretScanMode.WARN,
    "on": SecretScanMode.WARN,
    "yes": SecretScanMode.WARN,
    "warn": SecretScanMode.WARN,
    "block": SecretScanMode.BLOCK,
    "0": SecretScanMode.OFF,
    "false": SecretScanMode.OFF,
    "off": SecretScanMode.OFF,
    "no": SecretScanMode.OFF,
}


READY_WAIT_S = 10.0
"""``PATTERN_READY_WAIT_S``'s default."""
SWEEP_S = 15.0
"""``PATTERN_SWEEP_S``'s default: how often a process writes the accesses it counted."""


class PatternConfigError(SettingsError):
    """A ``PATTERN_*`` variable is invalid; the message names it and the rule."""


class PatternSettings(EnvSettings):
    """``PATTERN_*`` environment variables."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    short_ttl_s: int | None = Field(default=None, validation_alias="PATTERN_SHORT_TTL_S", ge=1, le=DAY_S)
    secret_scan: SecretScanMode = Field(default=SecretScanMode.WARN, validation_alias="PATTERN_SECRET_SCAN")
    export_dir: Path | None = Field(default=None, validation_alias="PATTERN_EXPORT_DIR")
    expired_window_s: int = Field(default=3600, validation_alias="PATTERN_EXPIRED_WINDOW_S", ge=60, le=DAY_S)
    ready_wait_s: float = Field(default=READY_WAIT_S, validation_alias="PATTERN_READY_WAIT_S", ge=0, le=300)
    sweep_s: float = Field(default=SWEEP_S, validation_alias="PATTERN_SWEEP_S", gt=0, le=3600)
    tier_hot: float = Field(default=0.8, validation_alias="PATTERN_TIER_HOT", gt=0, le=1)
    tier_warm: float = Field(default=0.4, validation_alias="PATTERN_TIER_WARM", gt=0, le=1)
    half_life_h: float = Field(default=24.0, validation_alias="PATTERN_HALF_LIFE_H", gt=0, le=24 * 365)
    category_weights: str = Field(default="", validation_alias="PATTERN_CATEGORY_WEIGHTS", max_length=1000)

    @field_validator("short_ttl_s", "export_dir", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("secret_scan", mode="before")
    @classmethod
    def _scan(cls, value: object) -> SecretScanMode:
        if isinstance(value, SecretScanMode):
            return value
        text = str(value).strip().lower()
        if text not in _SCAN_ALIASES:
            raise PatternConfigError("must be one of warn, block, off (or 1/0)", field="PATTERN_SECRET_SCAN")
        return _SCAN_ALIASES[text]

    @field_validator("category_weights")
    @classmethod
    def _weights(cls, value: str) -> str:
        try:
            parse_weights(value)
        except ValueError as exc:
            raise PatternConfigError(str(exc), field="PATTERN_CATEGORY_WEIGHTS") from None
        return value

    @model_validator(mode="after")
    def _cuts(self) -> PatternSettings:
        if self.tier_warm >= self.tier_hot:
            raise PatternConfigError("must be below PATTERN_TIER_HOT", field="PATTERN_TIER_WARM")
        return self

    def importance(self) -> ImportancePolicy:
        return ImportancePolicy(
            half_life_h=self.half_life_h,
            weights=parse_weights(self.category_weights),
            hot=self.tier_hot,
            warm=self.tier_warm,
        )


def load_settings() -> PatternSettings:
    try:
        return load(PatternSettings)
    except SettingsError as exc:
        raise PatternConfigError(f"invalid Pattern configuration: {exc}") from None


@dataclass(frozen=True)
class PatternLimits:
    max_content_bytes: int = 32 * 1024
    max_per_agent: int = 10_000
    max_shared_per_project: int = 10_000
    max_core_per_agent: int = 100
    max_recall: int = 200
    summary_bytes: int = 4096
    max_import_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class PatternConfig:
    """Everything the service needs besides NATS and identity."""

    temporary_ttl_s: int = DAY_S
    """Lifetime of ``recent`` and ``tasks`` memories."""
    secret_scan: SecretScanMode = SecretScanMode.WARN
    export_dir: Path | None = None
    expired_window_s: int = 3600
    """How long expiry markers (and so the "recently expired" count) are kept."""
    replicas: int = 1
    server_ttl: bool | None = None
    """Use nats-server per-message TTL; ``None`` = detect (2.11+), ``False`` = rely on cleanup."""
    limits: PatternLimits = field(default_factory=PatternLimits)
    ready_wait_s: float = READY_WAIT_S
    """How long a tool call made while the service is still loading waits for it (an agent
    host calls Pattern the moment it starts it), before failing with the reason."""
    sweep_s: float = SWEEP_S
    """How often the accesses counted in this process are written into the records."""
    importance: ImportancePolicy = field(default_factory=ImportancePolicy)
    """How a memory's score and tier are computed (pattern/importance.py)."""

    @classmethod
    def from_env(cls, shared: LoomSettings | None = None) -> PatternConfig:
        """The ``PATTERN_*`` variables from the environment; the shared ``LOOM_*`` ones from
        ``shared``, as the process's start-up read them (read here only when not given)."""
        s = load_settings()
        loom = shared if shared is not None else load(LoomSettings, error=PatternConfigError)
        return cls(
            temporary_ttl_s=s.short_ttl_s or DAY_S,
            secret_scan=s.secret_scan,
            export_dir=s.export_dir,
            expired_window_s=s.expired_window_s,
            replicas=loom.js_replicas,
            ready_wait_s=s.ready_wait_s,
            sweep_s=s.sweep_s,
            importance=s.importance(),
        )

    def export_root(self, project_path: Path) -> Path:
        """Exports and imports are confined to this directory."""
        root = self.export_dir if self.export_dir is not None else project_path / ".loom" / "memory-exports"
        return Path(os.path.abspath(root.expanduser()))
