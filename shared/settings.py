"""Environment-driven settings shared by every part.

What they mean: docs/architecture.md, "Identity and isolation" and "Reaching NATS".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.legacy import aliases_of
from shared.names import (
    validate_agent_id,
    validate_agent_type,
    validate_handle,
    validate_project_id,
    validate_user_id,
)
from shared.redact import redact


class NatsSettings(BaseSettings):
    """How to reach NATS. Credentials embedded in ``NATS_URL`` win over the separate variables."""

    # hide_input_in_errors: a rejected NATS_URL may carry a password; keep it out of the error.
    # env_ignore_empty: NATS_CREDS= (as templating often leaves it) means unset, not the path '.'.
    model_config = SettingsConfigDict(
        extra="ignore", populate_by_name=True, hide_input_in_errors=True, env_ignore_empty=True
    )

    url: str | None = Field(default=None, validation_alias="NATS_URL")
    user: str | None = Field(default=None, validation_alias="NATS_USER")
    password: SecretStr | None = Field(default=None, validation_alias="NATS_PASS")
    token: SecretStr | None = Field(default=None, validation_alias="NATS_TOKEN")
    creds: Path | None = Field(default=None, validation_alias="NATS_CREDS")
    creds_content: SecretStr | None = Field(default=None, validation_alias="NATS_CREDS_CONTENT")
    """The text of a creds file, for agents Weft starts where no file can be placed first."""
    tls_ca: Path | None = Field(default=None, validation_alias=AliasChoices("NATS_TLS_CA", "NATS_CA"))
    tls_cert: Path | None = Field(default=None, validation_alias=AliasChoices("NATS_TLS_CERT", "NATS_CERT"))
    tls_key: Path | None = Field(default=None, validation_alias=AliasChoices("NATS_TLS_KEY", "NATS_KEY"))

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """Keep URL credentials out of ``repr()`` (SecretStr already hides the rest)."""
        for name, value in super().__repr_args__():
            yield name, (redact(value) if name == "url" and value is not None else value)

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        for part in value.split(","):
            scheme = part.strip().split("://", 1)[0] if "://" in part else ""
            if scheme not in ("nats", "tls", "ws", "wss"):
                raise ValueError("NATS_URL must use one of the schemes nats://, tls://, ws://, wss://")
        return value

    @field_validator("creds", "tls_ca", "tls_cert", "tls_key", mode="before")
    @classmethod
    def _empty_path_is_none(cls, value: object) -> object:
        return None if value == "" else value


class IdentitySettings(BaseSettings):
    """Identity inputs; :mod:`shared.identity` turns them into ids (the rules: docs/architecture.md,
    Identity and isolation). The TypeScript Loom's names (``LOOMINAL_*``, ``MCP_PROJECT_PATH``)
    are read as aliases, from the table in :mod:`shared.legacy`."""

    # an empty variable means unset (LOOM_INSTANCE= is instance 0, not an error)
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    project_id: str | None = Field(
        default=None, validation_alias=AliasChoices("LOOM_PROJECT_ID", *aliases_of("LOOM_PROJECT_ID"))
    )
    project_path: Path | None = Field(
        default=None, validation_alias=AliasChoices("LOOM_PROJECT_PATH", *aliases_of("LOOM_PROJECT_PATH"))
    )
    agent_id: str | None = Field(
        default=None, validation_alias=AliasChoices("LOOM_AGENT_ID", *aliases_of("LOOM_AGENT_ID"))
    )
    subagent_type: str | None = Field(
        default=None, validation_alias=AliasChoices("LOOM_SUBAGENT_TYPE", *aliases_of("LOOM_SUBAGENT_TYPE"))
    )
    handle: str | None = Field(default=None, validation_alias="LOOM_HANDLE")
    agent_type: str = Field(default="generic", validation_alias="LOOM_AGENT_TYPE")
    user_id: str | None = Field(default=None, validation_alias="LOOM_USER_ID")
    instance: int | None = Field(default=None, validation_alias="LOOM_INSTANCE", ge=0, le=999)

    @field_validator("project_id")
    @classmethod
    def _project_id(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        return validate_project_id(value, "LOOM_PROJECT_ID")

    @field_validator("agent_id")
    @classmethod
    def _agent_id(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        return validate_agent_id(value, "LOOM_AGENT_ID")

    @field_validator("subagent_type", "handle", "user_id")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("handle")
    @classmethod
    def _handle(cls, value: str | None) -> str | None:
        return None if value is None else validate_handle(value, "LOOM_HANDLE")

    @field_validator("subagent_type")
    @classmethod
    def _subagent_type(cls, value: str | None) -> str | None:
        return None if value is None else validate_agent_type(value, "LOOM_SUBAGENT_TYPE")

    @field_validator("agent_type")
    @classmethod
    def _agent_type(cls, value: str) -> str:
        return validate_agent_type(value, "LOOM_AGENT_TYPE")

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str | None) -> str | None:
        return None if value is None else validate_user_id(value, "LOOM_USER_ID")


def data_home() -> Path:
    """Where Loom keeps local state (embedded nats-server data): ``LOOM_DATA_DIR``
    or ``$XDG_DATA_HOME/loom`` (default ``~/.local/share/loom``)."""
    explicit = os.environ.get("LOOM_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "loom"
