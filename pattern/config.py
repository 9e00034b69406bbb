"""Pattern settings (environment) and limits.

Limits are plain data so tests can shrink them; the environment only
controls behaviour an operator may want to change (TTL for tests, secret
scanning, where exports may be written).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.errors import Invalid, describe_problems, validation_problems

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


class PatternSettings(BaseSettings):
    """``PATTERN_*`` environment variables."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    short_ttl_s: int | None = Field(default=None, validation_alias="PATTERN_SHORT_TTL_S", ge=1, le=DAY_S)
    secret_scan: SecretScanMode = Field(default=SecretScanMode.WARN, validation_alias="PATTERN_SECRET_SCAN")
    export_dir: Path | None = Field(default=None, validation_alias="PATTERN_EXPORT_DIR")
    expired_window_s: int = Field(default=3600, validation_alias="PATTERN_EXPIRED_WINDOW_S", ge=60, le=DAY_S)
    replicas: int = Field(default=1, validation_alias="LOOM_JS_REPLICAS", ge=1, le=5)

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
            raise ValueError("PATTERN_SECRET_SCAN must be one of warn, block, off (or 1/0)")
        return _SCAN_ALIASES[text]


class PatternConfigError(Invalid, ValueError):
    """A ``PATTERN_*`` variable is invalid; the message names it and the rule."""


def load_settings() -> PatternSettings:
    try:
        return PatternSettings()
    except ValidationError as exc:
        problems = describe_problems(validation_problems(exc.errors()), limit=10)
        raise PatternConfigError(f"invalid Pattern configuration: {problems}") from None


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

    @classmethod
    def from_env(cls) -> PatternConfig:
        s = load_settings()
        return cls(
            temporary_ttl_s=s.short_ttl_s or DAY_S,
            secret_scan=s.secret_scan,
            export_dir=s.export_dir,
            expired_window_s=s.expired_window_s,
            replicas=s.replicas,
        )

    def export_root(self, project_path: Path) -> Path:
        """Exports and imports are confined to this directory."""
        root = self.export_dir if self.export_dir is not None else project_path / ".loom" / "memory-exports"
        return Path(os.path.abspath(root.expanduser()))
