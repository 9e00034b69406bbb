"""Mechanism-specific target configuration (the ``config`` object of a target).

Each mechanism has one pydantic model; :func:`validate_target_config` turns a
raw ``config`` dict into its normalised form or raises
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
from pathlib import PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.errors import Invalid

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SECRET_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
"""Settings that name the variable holding a secret take upper-case names only, so a token
pasted there by mistake (mixed case, as tokens are) is refused instead of stored."""
SECRET_ENV_RULE = "must be the name of an environment variable (upper-case letters, digits and '_')"
K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
NATS_SCHEMES = ("nats", "tls", "ws", "wss")

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


class _Config(BaseModel):
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
                raise ValueError("must be a nats://, tls://, ws:// or wss:// URL with a host")
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
                raise ValueError(f"{key!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if key in RESERVED_ENV:
                raise ValueError(f"{key!r} is set by Weft for every spawned agent and cannot be overridden")
        return v


def _env_name(v: str | None) -> str | None:
    if v is None:
        return None
    if SECRET_ENV_NAME.fullmatch(v) is None:
        raise ValueError(SECRET_ENV_RULE)
    return v


def _http_url(v: str | None, *, required: bool = False) -> str | None:
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


def _argv(v: Any) -> list[str]:
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


# -- local ---------------------------------------------------------------------


class LocalConfig(_Config):
    command: list[str]
    """Program and arguments, run directly (no shell)."""
    cwd: str | None = None
    inherit_env: bool = True
    """Pass Weft's own environment (PATH, HOME, ...) to the agent, minus NATS credentials."""
    startup_check_s: float = Field(default=2.0, ge=0, le=60)
    """An agent that exits within this window is a failed start (with its exit code and stderr)."""
    stop_grace_s: float = Field(default=10.0, ge=0, le=600)
    log_dir: str | None = None
    """Where the agent's stdout/stderr go (default: Loom's data directory)."""

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, v: Any) -> list[str]:
        return _argv(v)

    @field_validator("cwd", "log_dir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError("must be an absolute path")
        return v


# -- ssh -------------------------------------------------------------------------


class SshConfig(_Config):
    host: str = Field(min_length=1, max_length=255)
    port: int = Field(default=22, ge=1, le=65535)
    username: str = Field(min_length=1, max_length=64)
    command: list[str]
    """Remote program and arguments; each is shell-quoted on the remote side."""
    cwd: str | None = None
    key_file: str | None = None
    key_passphrase_env: str | None = None
    use_agent: bool = False
    """Authenticate with the keys of the local ssh-agent (``SSH_AUTH_SOCK``)."""
    host_key_policy: Literal["strict", "accept-new", "insecure"] = "strict"
    """strict: the host key must be in ``known_hosts`` or equal ``host_key``;
    accept-new: trust a host seen for the first time and record it in ``known_hosts``;
    insecure: no host-key check at all (only when you mean it)."""
    known_hosts: str | None = None
    host_key: str | None = None
    """A pinned public key (``ssh-ed25519 AAAA...``)."""
    connect_timeout_s: float = Field(default=10.0, gt=0, le=300)
    startup_check_s: float = Field(default=2.0, ge=0, le=60)
    stop_grace_s: float = Field(default=10.0, ge=0, le=600)
    log_file: str = "/tmp/loom-agent-{spinup_id}.log"
    """Remote file for the agent's output (``{spinup_id}`` is replaced)."""

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, v: Any) -> list[str]:
        return _argv(v)

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if any(c.isspace() for c in v) or v.startswith("-"):
            raise ValueError("must be a host name or address")
        return v

    @field_validator("username")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", v):
            raise ValueError("must be a user name (letters, digits, '_', '.', '-')")
        return v

    @field_validator("key_passphrase_env")
    @classmethod
    def _passphrase_env(cls, v: str | None) -> str | None:
        return _env_name(v)

    @field_validator("host_key")
    @classmethod
    def _host_key(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = v.split()
        if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
            raise ValueError("must be a public key line such as 'ssh-ed25519 AAAA...'")
        return " ".join(parts[:2])

    @field_validator("log_file")
    @classmethod
    def _log_file(cls, v: str) -> str:
        if not PurePosixPath(v).is_absolute():
            raise ValueError("must be an absolute remote path")
        return v

    @model_validator(mode="after")
    def _auth_and_trust(self) -> SshConfig:
        if not self.key_file and not self.use_agent:
            raise ValueError("key_file: give a private key file, or set use_agent: true")
        if self.host_key_policy == "strict" and not (self.known_hosts or self.host_key):
            raise ValueError(
                "known_hosts: the strict host-key policy needs a known_hosts file or a pinned host_key "
                "(or set host_key_policy: accept-new / insecure explicitly)"
            )
        if self.host_key_policy == "accept-new" and not self.known_hosts:
            raise ValueError("known_hosts: accept-new records new host keys and needs a known_hosts file")
        return self


# -- kubernetes ---------------------------------------------------------------------


class KubernetesConfig(_Config):
    image: str = Field(min_length=1, max_length=512)
    command: list[str] | None = None
    args: list[str] | None = None
    namespace: str | None = None
    """Default: the service account's namespace in-cluster, else ``default``."""
    api_url: str | None = None
    """Default: in-cluster (``KUBERNETES_SERVICE_HOST``) with the service-account token and CA."""
    token_env: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    service_account: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    resources: dict[str, dict[str, str]] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    backoff_limit: int = Field(default=0, ge=0, le=10)
    ttl_seconds_after_finished: int | None = Field(default=600, ge=0)
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    job_name_prefix: str = Field(default="loom-agent", max_length=40)
    timeout_s: float = Field(default=15.0, gt=0, le=300)

    @field_validator("command", "args", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> list[str] | None:
        return None if v is None else _argv(v)

    @field_validator("namespace", "service_account")
    @classmethod
    def _k8s_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 63 or K8S_NAME.fullmatch(v) is None):
            raise ValueError("must be a Kubernetes name (lowercase letters, digits, '-', at most 63)")
        return v

    @field_validator("job_name_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if K8S_NAME.fullmatch(v) is None:
            raise ValueError("must be lowercase letters, digits and '-'")
        return v

    @field_validator("api_url")
    @classmethod
    def _api(cls, v: str | None) -> str | None:
        return _http_url(v)

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, v: str | None) -> str | None:
        return _env_name(v)

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", key):
                raise ValueError(f"{key!r} is not a valid label key")
            if key.startswith("loom.dev/"):
                raise ValueError(f"{key!r}: the loom.dev/ labels are set by Weft")
            if not re.fullmatch(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", value):
                raise ValueError(f"{key!r}: {value!r} is not a valid label value")
        return v

    @model_validator(mode="after")
    def _credentials(self) -> KubernetesConfig:
        if self.token_env and self.token_file:
            raise ValueError("token_env: give token_env or token_file, not both")
        return self


# -- github-actions --------------------------------------------------------------------


class GithubActionsConfig(_Config):
    repository: str
    """``owner/repo``."""
    workflow: str
    """Workflow file name (``agent.yml``) or numeric id."""
    ref: str = "main"
    token_env: str = "GITHUB_TOKEN"
    api_url: str = "https://api.github.com"
    correlation_input: str = "correlation_id"
    """The workflow input that carries the spin-up id; the workflow's ``run-name`` must include it."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Extra workflow inputs; values may use the placeholders {work_id}, {agent_id}, ..."""
    pass_loom_inputs: bool = True
    """Also send ``agent_id``, ``project_id``, ``target_id``, ``work_id`` and ``nats_url`` inputs."""
    run_lookup_timeout_s: float = Field(default=60.0, gt=0, le=900)
    run_lookup_interval_s: float = Field(default=2.0, gt=0, le=60)
    timeout_s: float = Field(default=15.0, gt=0, le=300)

    @field_validator("repository")
    @classmethod
    def _repo(cls, v: str) -> str:
        if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}", v) is None:
            raise ValueError("must be 'owner/repo'")
        return v

    @field_validator("workflow")
    @classmethod
    def _workflow(cls, v: str) -> str:
        if not (v.isdigit() or re.fullmatch(r"[A-Za-z0-9_.-]+\.ya?ml", v)):
            raise ValueError("must be a workflow file name ending in .yml/.yaml, or a numeric workflow id")
        return v

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str) -> str:
        if not v or any(c.isspace() for c in v) or ".." in v:
            raise ValueError("must be a branch or tag name")
        return v

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, v: str) -> str:
        result = _env_name(v)
        assert result is not None
        return result

    @field_validator("api_url")
    @classmethod
    def _api(cls, v: str) -> str:
        result = _http_url(v, required=True)
        assert result is not None
        return result

    @field_validator("correlation_input")
    @classmethod
    def _input_name(cls, v: str) -> str:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,99}", v) is None:
            raise ValueError("must be a workflow input name")
        return v

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,99}", key) is None:
                raise ValueError(f"{key!r} is not a workflow input name")
            _check_placeholders(value, key)
        return v


# -- webhook --------------------------------------------------------------------------


def _check_placeholders(text: str, where: str | None = None) -> None:
    for name in PLACEHOLDER.findall(text):
        if name not in TEMPLATE_FIELDS:
            allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            prefix = f"{where!r}: " if where else ""
            raise ValueError(f"{prefix}unknown placeholder {{{name}}}; use {allowed}")


HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class WebhookConfig(_Config):
    url: str
    method: HttpMethod = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Header name -> environment variable holding its value (for Authorization and the like)."""
    body: str | None = None
    """Body template; default: a JSON object with every placeholder."""
    content_type: str = "application/json"
    secret_env: str | None = None
    """Environment variable holding the HMAC-SHA256 key; the body is signed when set."""
    signature_header: str = "X-Loom-Signature"
    success_codes: list[int] = Field(default_factory=lambda: list(range(200, 300)))
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    stop_url: str | None = None
    stop_method: HttpMethod = "POST"
    stop_body: str | None = None
    health_url: str | None = None
    health_method: Literal["GET", "HEAD", "POST"] = "GET"

    @field_validator("url", "stop_url", "health_url")
    @classmethod
    def _urls(cls, v: str | None) -> str | None:
        if v is not None:
            _check_placeholders(v)
        return _http_url(v)

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if HEADER_NAME.fullmatch(key) is None:
                raise ValueError(f"{key!r} is not a valid header name")
            if "\n" in value or "\r" in value:
                raise ValueError(f"{key!r}: header values must be one line")
        return v

    @field_validator("headers")
    @classmethod
    def _no_secret_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if key.lower() in ("authorization", "proxy-authorization", "x-api-key", "cookie"):
                raise ValueError(f"{key!r} carries a secret; name an environment variable in headers_env")
            _check_placeholders(value, key)
        return v

    @field_validator("headers_env")
    @classmethod
    def _header_envs(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if SECRET_ENV_NAME.fullmatch(value) is None:
                raise ValueError(f"{key!r}: {SECRET_ENV_RULE}")
        return v

    @field_validator("body", "stop_body")
    @classmethod
    def _body(cls, v: str | None) -> str | None:
        if v is not None:
            _check_placeholders(v)
        return v

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, v: str | None) -> str | None:
        return _env_name(v)

    @field_validator("signature_header")
    @classmethod
    def _sig(cls, v: str) -> str:
        if HEADER_NAME.fullmatch(v) is None:
            raise ValueError("must be a valid header name")
        return v

    @field_validator("success_codes")
    @classmethod
    def _codes(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("must list at least one status code")
        for code in v:
            if not 100 <= code <= 599:
                raise ValueError(f"{code} is not an HTTP status code")
        return sorted(set(v))


MechanismConfig = LocalConfig | SshConfig | KubernetesConfig | GithubActionsConfig | WebhookConfig

CONFIG_MODELS: dict[str, type[_Config]] = {
    "local": LocalConfig,
    "ssh": SshConfig,
    "kubernetes": KubernetesConfig,
    "github-actions": GithubActionsConfig,
    "webhook": WebhookConfig,
}


def _secret_hint(key: str) -> str | None:
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


def parse_config(mechanism: str, config: dict[str, Any]) -> MechanismConfig:
    """The typed config of ``mechanism``; :class:`InvalidTargetConfig` names each bad field."""
    model = CONFIG_MODELS.get(mechanism)
    if model is None:
        raise InvalidTargetConfig([FieldError("mechanism", f"must be one of {', '.join(CONFIG_MODELS)}")])
    if not isinstance(config, dict):
        raise InvalidTargetConfig([FieldError("config", "must be an object")])
    errors: list[FieldError] = []
    for key in config:
        hint = _secret_hint(str(key))
        if hint is not None:
            errors.append(FieldError(f"config.{key}", hint))
    if errors:
        raise InvalidTargetConfig(errors)
    try:
        parsed = model.model_validate(config)
    except ValidationError as exc:
        raise InvalidTargetConfig(_field_errors(exc)) from None
    assert isinstance(
        parsed, LocalConfig | SshConfig | KubernetesConfig | GithubActionsConfig | WebhookConfig
    )
    return parsed


def validate_target_config(mechanism: str, config: dict[str, Any]) -> dict[str, Any]:
    """Validate and normalise a target's ``config`` for its mechanism (what the target store keeps)."""
    return parse_config(mechanism, config).model_dump(mode="json", exclude_defaults=True)


def _field_errors(exc: ValidationError) -> list[FieldError]:
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
