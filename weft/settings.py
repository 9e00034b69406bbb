"""Weft's settings: ``WEFT_*`` variables plus the shared ``NATS_*`` ones."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.identity import project_id_for_path
from shared.names import validate_capability, validate_project_id
from shared.server import check_sync_interval
from shared.settings import IdentitySettings, NatsSettings

DEFAULT_PORT = 8080
DEFAULT_NATS_PORT = 4222
DEFAULT_NATS_WS_PORT = 4223
DEFAULT_NATS_SYNC = "always"
"""The bundled server is one machine with no replicas: without an fsync per write, an OS
crash or power loss could drop work it had already acknowledged."""


def default_project_id() -> str:
    """The project this Weft serves when a request names none: the shared identity's
    project (``LOOM_PROJECT_ID`` or the hash of the project path)."""
    identity = IdentitySettings()
    if identity.project_id:
        return identity.project_id
    return project_id_for_path(identity.project_path or Path.cwd())


class WeftSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, hide_input_in_errors=True)

    host: str = Field(default="127.0.0.1", validation_alias="WEFT_HOST")
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, validation_alias="WEFT_PORT")
    api_tokens: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list, validation_alias="WEFT_API_TOKENS"
    )
    """Bearer tokens accepted on every route but /health and /metrics; empty: no auth."""
    policy_file: Path | None = Field(
        default=None, validation_alias=AliasChoices("WEFT_POLICY_FILE", "WEFT_BOUNDARY_POLICY")
    )
    project_id: str = Field(default_factory=default_project_id, validation_alias="WEFT_PROJECT_ID")
    public_docs: bool = Field(default=True, validation_alias="WEFT_PUBLIC_DOCS")
    """Serve /docs and /openapi.json without a token (they describe the API, hold no data)."""
    sweep_interval_s: float = Field(default=5.0, gt=0, le=3600, validation_alias="WEFT_SWEEP_INTERVAL_S")
    """How often queued work is re-routed and past-deadline work expired."""
    work_retention_s: float = Field(
        default=7 * 24 * 3600, ge=0, le=10 * 365 * 24 * 3600, validation_alias="WEFT_WORK_RETENTION_S"
    )
    """How long completed, cancelled and expired work records are kept (0: forever)."""
    agent_retention_s: float = Field(
        default=7 * 24 * 3600, ge=0, le=10 * 365 * 24 * 3600, validation_alias="WEFT_AGENT_RETENTION_S"
    )
    """How long the registry keeps the entry of an agent that went offline (0: forever)."""
    stale_check_interval_s: float = Field(
        default=1.0, gt=0, le=600, validation_alias="WEFT_STALE_CHECK_INTERVAL_S"
    )
    ws_ping_interval_s: float = Field(default=20.0, gt=0, le=3600, validation_alias="WEFT_WS_PING_INTERVAL_S")
    max_projects: int = Field(default=256, ge=1, le=100_000, validation_alias="WEFT_MAX_PROJECTS")
    """Projects served at once (each keeps a few watchers); the least recently used is dropped."""
    nats_port: int = Field(default=DEFAULT_NATS_PORT, ge=-1, le=65535, validation_alias="WEFT_NATS_PORT")
    """Client port of the embedded nats-server (only when NATS_URL is unset; -1: any free port)."""
    nats_ws_port: int = Field(
        default=DEFAULT_NATS_WS_PORT, ge=-1, le=65535, validation_alias="WEFT_NATS_WS_PORT"
    )
    nats_sync: str = Field(default=DEFAULT_NATS_SYNC, validation_alias="LOOM_NATS_SYNC")
    """JetStream ``sync_interval`` of the bundled nats-server: ``always`` or a duration (``1s``)."""
    public_url: str | None = Field(default=None, validation_alias="WEFT_PUBLIC_URL")
    """Weft's URL as clients reach it (behind a proxy); the A2A cards advertise it. Default: the
    URL each request came in on."""
    a2a_default_capability: str | None = Field(default=None, validation_alias="WEFT_A2A_DEFAULT_CAPABILITY")
    """Capability of A2A messages whose metadata names none; unset: such messages are refused."""
    log_level: str = Field(default="INFO", validation_alias="WEFT_LOG_LEVEL")
    banner: bool = False
    """Print the start-up banner (``weft serve`` sets this)."""
    nats: NatsSettings = Field(default_factory=NatsSettings)

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("project_id")
    @classmethod
    def _project(cls, value: str) -> str:
        return validate_project_id(value, "WEFT_PROJECT_ID")

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not value.startswith(("http://", "https://")) or "@" in value:
            raise ValueError("WEFT_PUBLIC_URL must be an http:// or https:// URL without credentials")
        return value.rstrip("/")

    @field_validator("a2a_default_capability")
    @classmethod
    def _default_capability(cls, value: str | None) -> str | None:
        return None if not value else validate_capability(value, "WEFT_A2A_DEFAULT_CAPABILITY")

    @field_validator("nats_sync")
    @classmethod
    def _sync(cls, value: str) -> str:
        if value == "":  # LOOM_NATS_SYNC= (as templating often leaves it) means unset
            return DEFAULT_NATS_SYNC
        return check_sync_interval(value, "LOOM_NATS_SYNC")

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError("WEFT_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    def token_values(self) -> list[bytes]:
        return [t.get_secret_value().encode() for t in self.api_tokens]

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_tokens)
