"""Weft's settings: ``WEFT_*`` variables plus the shared ``NATS_*`` and ``LOOM_*`` ones.

Read once, by ``weft serve`` (or :func:`weft.app.create_app` when given none), and
passed down: :attr:`WeftSettings.loom` carries the fabric-wide ``LOOM_*`` variables."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from shared.context.trees import DELETION_WINDOW_S
from shared.identity import project_id_for_path
from shared.names import validate_capability, validate_project_id
from shared.nats.server import check_sync_interval
from shared.settings import (
    LOG_LEVEL_RULE,
    LOG_LEVELS,
    EnvSettings,
    IdentitySettings,
    LoomSettings,
    NatsSettings,
    SettingsError,
)
from weft.tokens import ApiToken, parse_api_tokens

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


class WeftSettings(EnvSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, hide_input_in_errors=True)

    host: str = Field(default="127.0.0.1", validation_alias="WEFT_HOST")
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, validation_alias="WEFT_PORT")
    api_tokens: Annotated[list[ApiToken], NoDecode] = Field(
        default_factory=list, validation_alias="WEFT_API_TOKENS"
    )
    """Bearer tokens with their scopes (:mod:`weft.tokens`), needed on every route but /health
    and /metrics; empty: no auth (loopback only, see :meth:`exposure_problem`)."""
    allow_open_api: bool = Field(default=False, validation_alias="WEFT_ALLOW_OPEN_API")
    """Serve without tokens on a non-loopback address anyway (see :meth:`exposure_problem`)."""
    policy_file: Path | None = Field(
        default=None, validation_alias=AliasChoices("WEFT_POLICY_FILE", "WEFT_BOUNDARY_POLICY")
    )
    autonomy_file: Path | None = Field(default=None, validation_alias="WEFT_AUTONOMY_FILE")
    """An autonomy policy, YAML or JSON (docs/operator.md), for every project served that has
    none set through the API (or one from this file, which an edited file then replaces)."""
    project_id: str = Field(default_factory=default_project_id, validation_alias="WEFT_PROJECT_ID")
    public_docs: bool = Field(default=True, validation_alias="WEFT_PUBLIC_DOCS")
    """Serve /docs and /openapi.json without a token (they describe the API, hold no data)."""
    sweep_interval_s: float = Field(default=5.0, gt=0, le=3600, validation_alias="WEFT_SWEEP_INTERVAL_S")
    """How often queued work is re-routed and past-deadline work expired."""
    work_retention_s: float = Field(
        default=7 * 24 * 3600, ge=0, le=10 * 365 * 24 * 3600, validation_alias="WEFT_WORK_RETENTION_S"
    )
    """How long completed, cancelled and expired work records are kept (0: forever)."""
    context_deletion_window_s: float = Field(
        default=DELETION_WINDOW_S, ge=0, le=365 * 24 * 3600, validation_alias="WEFT_CONTEXT_DELETION_WINDOW_S"
    )
    """How long a context tree deleted through Weft can still be restored before it is purged."""
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
    nats_auth: Literal["open", "scoped"] = Field(default="open", validation_alias="WEFT_NATS_AUTH")
    """``scoped``: NATS in operator mode, Weft issues each agent its own credentials
    (docs/security.md); ``open``: NATS as configured (the bundled one without auth)."""
    nats_issuer: Path | None = Field(default=None, validation_alias="WEFT_NATS_ISSUER")
    """The issuer file (seeds) for scoped auth; default for the bundled server:
    ``<data home>/nats/issuer.json``, created on first use. Required with ``NATS_URL``."""
    agent_credentials_ttl_s: float = Field(
        default=12 * 3600, ge=60, le=90 * 24 * 3600, validation_alias="WEFT_AGENT_CREDENTIALS_TTL_S"
    )
    """Lifetime of the credentials Weft gives a spun-up agent (and the default for minted ones);
    a spun-up agent's are revoked as soon as its operation ends."""
    public_url: str | None = Field(default=None, validation_alias="WEFT_PUBLIC_URL")
    """Weft's URL as clients reach it (behind a proxy); the A2A cards advertise it. Default: the
    URL each request came in on."""
    a2a_default_capability: str | None = Field(default=None, validation_alias="WEFT_A2A_DEFAULT_CAPABILITY")
    """Capability of A2A messages whose metadata names none; unset: such messages are refused."""
    a2a_grpc_port: int | None = Field(default=None, ge=0, le=65535, validation_alias="WEFT_A2A_GRPC_PORT")
    """Serve A2A's gRPC binding on this port too (on ``host``; 0: a free one); unset: not served."""
    a2a_push_private_urls: bool = Field(default=False, validation_alias="WEFT_A2A_PUSH_PRIVATE_URLS")
    """Let A2A clients register webhooks on loopback, private and link-local addresses (off:
    a client could otherwise make Weft call into its own network)."""
    github_token: SecretStr | None = Field(default=None, validation_alias="WEFT_GITHUB_TOKEN")
    """Forge mode (docs/landing.md): the token Weft reads pull requests with; never shown."""
    github_webhook_secret: SecretStr | None = Field(
        default=None, validation_alias="WEFT_GITHUB_WEBHOOK_SECRET"
    )
    """Forge mode: the secret of GitHub's webhook (``POST /hooks/github``), which signs each
    delivery; unset: the hook is off (Weft polls only). Never shown."""
    forge_poll_s: float = Field(default=60.0, gt=0, le=86_400, validation_alias="WEFT_FORGE_POLL_S")
    """How often each pull request an item waits on is asked about (GitHub's rate limit)."""
    log_level: str = Field(default="INFO", validation_alias="WEFT_LOG_LEVEL")
    banner: bool = False
    """Print the start-up banner (``weft serve`` sets this)."""
    nats: NatsSettings = Field(default_factory=NatsSettings)
    loom: LoomSettings = Field(default_factory=LoomSettings)
    """The fabric-wide ``LOOM_*`` variables (replicas, ack wait, the nats-server binary)."""

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_api_tokens(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return parse_api_tokens(",".join(value))
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
            raise SettingsError("WEFT_PUBLIC_URL must be an http:// or https:// URL without credentials")
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
        if level not in LOG_LEVELS:
            raise SettingsError(f"WEFT_LOG_LEVEL {LOG_LEVEL_RULE}")
        return level

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_tokens)

    @property
    def loopback_only(self) -> bool:
        return is_loopback(self.host)

    @property
    def scoped_nats(self) -> bool:
        return self.nats_auth == "scoped"

    def exposure_problem(self) -> str | None:
        """Why serving with these settings would open the API to the network, or None.

        Without tokens anyone who reaches the port may register a ``local`` target and
        submit work for it: run commands on this host. So a non-loopback address needs
        tokens, unless ``WEFT_ALLOW_OPEN_API`` says the risk is taken knowingly."""
        if self.auth_enabled or self.loopback_only or self.allow_open_api:
            return None
        return (
            "refusing to serve the API on a non-loopback address (WEFT_HOST/--host) without "
            "WEFT_API_TOKENS: anyone who reaches the port could run commands on this host through "
            "a local target. Set WEFT_API_TOKENS (docs/security.md), listen on 127.0.0.1, or set "
            "WEFT_ALLOW_OPEN_API=1 to serve an open API anyway"
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine: ``localhost`` or a loopback address.

    Anything else (``0.0.0.0``, ``::``, an empty host, a host name) may be reachable from
    elsewhere, so it counts as exposed."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
