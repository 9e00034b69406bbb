"""What every mechanism's target configuration (the ``config`` object of a target) shares.

Each mechanism module declares its own model, a subclass of
:class:`MechanismConfig`, next to the mechanism itself;
:func:`weft.spinup.mechanisms.parse_config` finds it by the target's
mechanism and turns a raw ``config`` dict into it, or raises
:class:`InvalidTargetConfig` whose errors name the field (``config.command``)
and the rule. Secrets are never stored in a target: tokens, webhook secrets
and passphrases are read at use time from environment variables whose *names*
the config carries (``token_env``, ``secret_env``), so a target can be listed,
returned and logged without leaking anything.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.errors import Invalid, shown_name
from shared.settings import NATS_SCHEMES, nats_schemes_text

M = TypeVar("M", bound="MechanismConfig")

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SECRET_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
"""Settings that name the variable holding a secret take upper-case names only, so a token
pasted there by mistake (mixed case, as tokens are) is refused instead of stored."""
SECRET_ENV_RULE = "must be the name of an environment variable (upper-case letters, digits and '_')"
K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

TEMPLATE_FIELDS = ("work_id", "target_id", "target_name", "agent_id", "project_id", "spinup_id")
"""Placeholders a webhook body, URL or header may use."""

RESERVED_ENV = frozenset(
    {
        "NATS_URL",
        "LOOM_PROJECT_ID",
        "LOOM_TARGET_ID",
        "LOOM_SPINUP_ID",
        "LOOM_WORK_ID",
        "LOOM_AGENT_ID",
        "LOOM_AGENT_TYPE",
        "LOOM_CAPABILITIES",
        "LOOM_BOUNDARIES",
        "LOOM_AUTO_REGISTER",
        "NATS_CREDS_CONTENT",
    }
)
"""Variables Weft sets for every spawned agent (the join contract)."""

SECRET_KEYS = ("token", "secret", "password", "passphrase", "api_key", "private_key")
"""Keys that would put a secret into the stored target; each has an ``*_env`` form instead."""


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidTargetConfig(Invalid, ValueError):
    """A target config that does not fit its mechanism; ``errors`` name each field."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))

    def details(self) -> list[dict[str, str]]:
        return [{"field": e.field, "message": e.message} for e in self.errors]


class MechanismConfig(BaseModel):
    """What every mechanism's config has; each mechanism module subclasses it once."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    nats_url: str | None = None
    """The NATS URL the spawned agent should use (e.g. a ``wss://`` URL for a
    GitHub runner); default: the URL Weft gives agents."""

    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the agent (not for secrets: they would be stored)."""

    register_timeout_s: float | None = Field(default=None, gt=0, le=86_400)
    """How long a started agent may take to register (default: Weft's WEFT_SPINUP_REGISTER_TIMEOUT_S)."""

    @field_validator("nats_url")
    @classmethod
    def _nats_url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        for part in v.split(","):
            parts = urlsplit(part.strip())
            if parts.scheme not in NATS_SCHEMES or not parts.hostname:
                raise ValueError(f"must be a {nats_schemes_text()} URL with a host")
            if parts.password or parts.username:
                raise ValueError(
                    "must not carry credentials (they would be stored in the target); "
                    "give agents credentials through their own environment"
                )
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if ENV_NAME.fullmatch(key) is None:
                raise ValueError(
                    f"key {shown_name(key)} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )
            if key in RESERVED_ENV:
                raise ValueError(f"{key} is set by Weft for every spawned agent and cannot be overridden")
        return v


def secret_env_name(v: str | None) -> str | None:
    if v is None:
        return None
    if SECRET_ENV_NAME.fullmatch(v) is None:
        raise ValueError(SECRET_ENV_RULE)
    return v


def http_url(v: str | None, *, required: bool = False) -> str | None:
    if v is None or v == "":
        if required:
            raise ValueError("is required")
        return None
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials (use the *_env settings for secrets)")
    return v.rstrip("/") if not parts.query else v


def argv(v: Any) -> list[str]:
    """A command as an argument vector; a string is split like a shell would, but never run by one."""
    if isinstance(v, str):
        try:
            v = shlex.split(v)
        except ValueError as exc:
            raise ValueError(f"cannot be split into arguments: {exc}") from None
    if not isinstance(v, list) or not v or not all(isinstance(a, str) for a in v):
        raise ValueError("must be a non-empty list of arguments (or a string split into them)")
    if not v[0].strip():
        raise ValueError("the program (first argument) must not be empty")
    return list(v)


# -- shared by several mechanisms ------------------------------------------------------


def check_placeholders(text: str, where: str | None = None) -> None:
    for name in PLACEHOLDER.findall(text):
        if name not in TEMPLATE_FIELDS:
            allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            prefix = f"key {shown_name(where)}: " if where else ""
            raise ValueError(f"{prefix}unknown placeholder {{{shown_name(name)}}}; use {allowed}")


def secret_hint(key: str) -> str | None:
    lowered = key.lower()
    for word in SECRET_KEYS:
        if lowered == word or lowered.endswith("_" + word):
            # (the first word goes first: error envelopes mask what follows "token:" and the like)
            return (
                "refused. Secrets are not stored in targets: put the value in an environment variable "
                "of Weft and name that variable in the matching *_env setting (token_env, secret_env, "
                "key_passphrase_env, headers_env)"
            )
    return None


def field_errors(exc: ValidationError) -> list[FieldError]:
    errors: list[FieldError] = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = [str(p) for p in err["loc"]]
        message = str(err["msg"])
        # model validators report "Value error, <field>: <rule>": put the field in the location
        message = message.removeprefix("Value error, ")
        if not loc and ": " in message:
            head, rest = message.split(": ", 1)
            if re.fullmatch(r"[a-z_]+", head):
                loc, message = [head], rest
        if err["type"] == "extra_forbidden":
            message = "is not a setting of this mechanism"
        elif err["type"] == "missing":
            message = "is required"
        errors.append(FieldError(".".join(["config", *loc]), message))
    return errors


def validate_config(model: type[M], config: dict[str, Any]) -> M:
    """``config`` checked against its mechanism's ``model``; :class:`InvalidTargetConfig`
    names every bad field (a secret where a variable name belongs is refused first)."""
    if not isinstance(config, dict):
        raise InvalidTargetConfig([FieldError("config", "must be an object")])
    errors = [
        FieldError(f"config.{key}", hint) for key in config if (hint := secret_hint(str(key))) is not None
    ]
    if errors:
        raise InvalidTargetConfig(errors)
    try:
        return model.model_validate(config)
    except ValidationError as exc:
        raise InvalidTargetConfig(field_errors(exc)) from None
