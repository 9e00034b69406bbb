"""Runner configuration: everything comes from the environment (the workflow's
``env:``, a Kubernetes Job's env, compose), validated up front so that a bad
value is one clear line naming the variable, before any agent starts."""

from __future__ import annotations

import hashlib
import math
import os
import re
import shlex
import shutil
import string
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shared.names import (
    InvalidNameError,
    validate_agent_id,
    validate_agent_type,
    validate_capability,
    validate_project_id,
)

# The variables this runner reads itself (besides NatsSettings / IdentitySettings).
RUNNER_VARIABLES: dict[str, str] = {
    "LOOM_CORRELATION_ID": "id Weft gave this start (its spin-up id); the workflow's run-name carries it",
    "LOOM_CAPABILITY": "a capability to register (added to LOOM_CAPABILITIES)",
    "AGENT_COMMAND": "the agent command line, with {placeholders}",
    "AGENT_TIMEOUT_S": "seconds before the agent is stopped",
    "AGENT_API_KEY": "the agent CLI's API key",
    "AGENT_API_KEY_ENV": "the variable under which the agent CLI expects that key",
    "LOOM_WARP_COMMAND": "how to start Warp (default: the warp script next to this Python)",
    "LOOM_RUNNER_ALLOW_INSECURE": "1 allows nats:// and ws:// (in-cluster or local testing)",
    "LOOM_NATS_SECRET_NAME": "Kubernetes Secret with this agent's NATS_URL/NATS_USER/NATS_PASS/NATS_TOKEN",
    "LOOM_K8S_API_URL": "Kubernetes API for LOOM_NATS_SECRET_NAME (default: the in-cluster service)",
    "LOOM_K8S_SA_DIR": "service-account token folder for LOOM_NATS_SECRET_NAME (default: the mounted one)",
}
# Read by the runner and handed on to Warp (warp/settings.py defines them).
SHARED_WITH_WARP: dict[str, str] = {
    "LOOM_WORK_ID": "the work item the agent was started for (may be empty)",
    "LOOM_CAPABILITIES": "comma-separated capabilities to register",
    "LOOM_TARGET_ID": "the Weft target that started the agent",
    "LOOM_SPINUP_ID": "the spin-up operation in Weft (default: LOOM_CORRELATION_ID)",
}

PLACEHOLDERS = frozenset(
    {
        "mcp_config",
        "prompt",
        "prompt_file",
        "work_id",
        "capability",
        "correlation_id",
        "agent_id",
        "project_id",
    }
)
DEFAULT_TIMEOUT_S = 2880.0
MAX_TIMEOUT_S = 86_400.0
_CORRELATION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_WORK_ID = re.compile(r"[0-9a-f]{32}")
_OPAQUE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECURE_SCHEMES = ("wss", "tls")


class ConfigError(ValueError):
    """A missing or invalid setting; the message names the variable and the rule."""


@dataclass(frozen=True)
class RunnerConfig:
    correlation_id: str
    work_id: str | None
    capabilities: tuple[str, ...]
    """May be empty: then the work item's capability is used (looked up in NATS)."""
    project_id: str
    agent_id: str
    agent_type: str
    target_id: str | None
    spinup_id: str
    nats_url: str
    agent_command: str
    timeout_s: float
    api_key: str | None
    api_key_env: str
    warp_command: list[str]


def agent_id_for(correlation_id: str) -> str:
    """The agent id a run uses when Weft did not choose one: stable per correlation id,
    so the failure-report step (a separate process) finds the items the agent held."""
    return hashlib.sha256(f"loom-runner\0{correlation_id}".encode()).hexdigest()[:32]


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        known = RUNNER_VARIABLES.get(name) or SHARED_WITH_WARP.get(name) or "see docs/deploy.md"
        raise ConfigError(f"{name}: is required ({known})")
    return value


def _checked(name: str, value: str, check: object) -> str:
    try:
        return str(check(value, name))  # type: ignore[operator]
    except InvalidNameError as exc:
        raise ConfigError(str(exc)) from None


def correlation_id_from(env: Mapping[str, str]) -> str:
    """LOOM_CORRELATION_ID (the workflow input), else LOOM_SPINUP_ID (a Kubernetes Job's env)."""
    if not env.get("LOOM_CORRELATION_ID", "").strip() and env.get("LOOM_SPINUP_ID", "").strip():
        value = env["LOOM_SPINUP_ID"].strip()
        if not _CORRELATION.fullmatch(value):
            raise ConfigError("LOOM_SPINUP_ID: must be 1-128 letters, digits, '.', '_' or '-'")
        return value
    value = _required(env, "LOOM_CORRELATION_ID")
    if not _CORRELATION.fullmatch(value):
        raise ConfigError(
            "LOOM_CORRELATION_ID: must be 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def nats_url_from(env: Mapping[str, str], allow_insecure: bool) -> str:
    """NATS_URL must be set; outside local testing it must be encrypted (wss:// or tls://)."""
    url = _required(env, "NATS_URL")
    schemes = {part.strip().split("://", 1)[0] for part in url.split(",") if "://" in part}
    if not schemes:
        raise ConfigError("NATS_URL: must be a URL such as wss://user:password@nats.example.com")
    insecure = sorted(s for s in schemes if s not in _SECURE_SCHEMES)
    if insecure and not allow_insecure:
        raise ConfigError(
            f"NATS_URL: scheme {insecure[0]}:// is not encrypted; use wss:// or tls:// "
            "(or LOOM_RUNNER_ALLOW_INSECURE=1 for local testing)"
        )
    return url


def agent_command_from(env: Mapping[str, str]) -> str:
    command = _required(env, "AGENT_COMMAND")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"AGENT_COMMAND: cannot be split into words: {exc}") from None
    if not words:
        raise ConfigError("AGENT_COMMAND: is empty")
    for word in words:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(word) if f is not None]
        except ValueError as exc:
            raise ConfigError(f"AGENT_COMMAND: bad placeholder in {word!r}: {exc}") from None
        for name in fields:
            if name not in PLACEHOLDERS:
                raise ConfigError(
                    f"AGENT_COMMAND: unknown placeholder {{{name}}}; known: "
                    + ", ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS))
                )
    return command


def timeout_from(env: Mapping[str, str]) -> float:
    raw = env.get("AGENT_TIMEOUT_S", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"AGENT_TIMEOUT_S: {raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 1 <= value <= MAX_TIMEOUT_S:
        raise ConfigError(f"AGENT_TIMEOUT_S: must be between 1 and {MAX_TIMEOUT_S:.0f} seconds")
    return value


def warp_command_from(env: Mapping[str, str]) -> list[str]:
    raw = env.get("LOOM_WARP_COMMAND", "").strip()
    if raw:
        try:
            words = shlex.split(raw)
        except ValueError as exc:
            raise ConfigError(f"LOOM_WARP_COMMAND: cannot be split into words: {exc}") from None
        if words:
            return words
    beside = Path(sys.executable).parent / "warp"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("warp")
    if found:
        return [found]
    raise ConfigError("LOOM_WARP_COMMAND: warp is not installed here; install Loom (pip install .) or set it")


def optional_id(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    if not _OPAQUE_ID.fullmatch(value):
        raise ConfigError(f"{name}: must be 1-128 letters, digits, '_', '.' or '-'")
    return value


def capabilities_from(env: Mapping[str, str]) -> tuple[str, ...]:
    """LOOM_CAPABILITIES (comma-separated, as Weft's spin-up sets it) plus LOOM_CAPABILITY."""
    found: set[str] = set()
    for name in ("LOOM_CAPABILITIES", "LOOM_CAPABILITY"):
        for part in env.get(name, "").split(","):
            if part.strip():
                found.add(_checked(name, part.strip(), validate_capability))
    return tuple(sorted(found))


def load(env: Mapping[str, str], *, allow_insecure: bool = False, need_agent: bool = True) -> RunnerConfig:
    """Validate the environment. ``need_agent=False`` (failure reports) skips the agent command."""
    allow_insecure = allow_insecure or env.get("LOOM_RUNNER_ALLOW_INSECURE", "") == "1"
    correlation_id = correlation_id_from(env)
    work_id = env.get("LOOM_WORK_ID", "").strip() or None
    if work_id is not None and not _WORK_ID.fullmatch(work_id):
        raise ConfigError("LOOM_WORK_ID: must be 32 lowercase hex characters (a Loom work id)")
    capabilities = capabilities_from(env)
    if not capabilities and work_id is None:
        raise ConfigError(
            "LOOM_CAPABILITIES: give the agent's capabilities "
            "(or LOOM_WORK_ID, whose capability is then used)"
        )
    project_id = _checked("LOOM_PROJECT_ID", _required(env, "LOOM_PROJECT_ID"), validate_project_id)
    explicit_agent = env.get("LOOM_AGENT_ID", "").strip()
    agent_id = (
        _checked("LOOM_AGENT_ID", explicit_agent, validate_agent_id)
        if explicit_agent
        else agent_id_for(correlation_id)
    )
    agent_type = _checked(
        "LOOM_AGENT_TYPE", env.get("LOOM_AGENT_TYPE", "").strip() or "generic", validate_agent_type
    )
    api_key_env = env.get("AGENT_API_KEY_ENV", "").strip() or "ANTHROPIC_API_KEY"
    if not _ENV_NAME.fullmatch(api_key_env):
        raise ConfigError("AGENT_API_KEY_ENV: must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    if api_key_env.startswith(("NATS_", "LOOM_")):
        raise ConfigError("AGENT_API_KEY_ENV: must not be a NATS_ or LOOM_ variable")
    return RunnerConfig(
        correlation_id=correlation_id,
        work_id=work_id,
        capabilities=capabilities,
        project_id=project_id,
        agent_id=agent_id,
        agent_type=agent_type,
        target_id=optional_id(env, "LOOM_TARGET_ID"),
        spinup_id=optional_id(env, "LOOM_SPINUP_ID") or correlation_id,
        nats_url=nats_url_from(env, allow_insecure),
        agent_command=agent_command_from(env) if need_agent else "",
        timeout_s=timeout_from(env),
        api_key=env.get("AGENT_API_KEY") or None,
        api_key_env=api_key_env,
        warp_command=warp_command_from(env) if need_agent else [],
    )
