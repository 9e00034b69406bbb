"""Spin-up settings (``WEFT_SPINUP_*``, ``WEFT_AGENT_NATS_URL``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from shared.settings import EnvSettings, SettingsError, nats_schemes_text, nats_url_schemes_ok


class SpinupSettings(EnvSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, hide_input_in_errors=True)

    mode: Literal["managed", "none"] = Field(default="managed", validation_alias="WEFT_SPINUP")
    """``none``: this Weft registers targets but never starts agents (e.g. a read-only replica)."""

    register_timeout_s: float = Field(
        default=120.0, gt=0, le=86_400, validation_alias="WEFT_SPINUP_REGISTER_TIMEOUT_S"
    )
    """A started agent that has not registered by then is timed out and stopped."""
    tick_s: float = Field(default=1.0, gt=0, le=600, validation_alias="WEFT_SPINUP_TICK_S")
    """How often operations are reconciled (registrations, time-outs, idle agents, health checks)."""
    shutdown_grace_s: float = Field(
        default=30.0, ge=0, le=3600, validation_alias="WEFT_SPINUP_SHUTDOWN_GRACE_S"
    )
    """After asking an idle agent to shut down, how long to wait before its mechanism stops it."""
    stop_retry_s: float = Field(default=120.0, gt=0, le=86_400, validation_alias="WEFT_SPINUP_STOP_RETRY_S")
    """A stop that a replica began but did not finish is retried after this long."""
    retention_s: float = Field(
        default=7 * 24 * 3600, ge=60, le=365 * 24 * 3600, validation_alias="WEFT_SPINUP_RETENTION_S"
    )
    """Ended operations are kept this long in the spin-ups bucket (their events stay in the stream)."""
    health_checks: bool = Field(default=True, validation_alias="WEFT_SPINUP_HEALTH_CHECKS")
    discover_interval_s: float = Field(
        default=30.0, gt=0, le=3600, validation_alias="WEFT_SPINUP_DISCOVER_INTERVAL_S"
    )
    """How often projects with live spin-ups are found in JetStream (so a restarted Weft carries them on)."""
    breaker_failures: int = Field(default=3, ge=0, le=1000, validation_alias="WEFT_SPINUP_BREAKER_FAILURES")
    """A target whose starts failed this many times within the window is disabled (0: never)."""
    breaker_window_s: float = Field(
        default=600.0, gt=0, le=7 * 86_400, validation_alias="WEFT_SPINUP_BREAKER_WINDOW_S"
    )
    agent_nats_url: str | None = Field(default=None, validation_alias="WEFT_AGENT_NATS_URL")
    """NATS URL handed to spawned agents (default: the URL Weft itself uses)."""
    log_dir: Path | None = Field(default=None, validation_alias="WEFT_SPINUP_LOG_DIR")
    """Where local agents' output goes (default: ``<data home>/spinup-logs/<project>``)."""

    @field_validator("agent_nats_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not nats_url_schemes_ok(value):
            raise SettingsError(f"WEFT_AGENT_NATS_URL must use {nats_schemes_text()}")
        return value
