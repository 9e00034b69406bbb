"""The mechanisms a target can start agents with: the one registry.

Each mechanism module declares its name and its config model once, on its
:class:`~weft.spinup.mechanisms.base.Mechanism` subclass; everything that
lists mechanisms (config validation, the set a Weft runs, the names Weft's
REST API accepts and advertises at ``GET /api/mechanisms``, and so Shuttle's
list) comes from :data:`MECHANISM_TYPES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema

from weft.spinup.config import FieldError, InvalidTargetConfig, MechanismConfig, validate_config
from weft.spinup.mechanisms.base import HandleCallback, Launch, Mechanism, MechanismError, ProbeResult
from weft.spinup.mechanisms.github_actions import GithubActionsMechanism
from weft.spinup.mechanisms.kubernetes import KubernetesMechanism
from weft.spinup.mechanisms.local import LocalMechanism
from weft.spinup.mechanisms.ssh import SshMechanism
from weft.spinup.mechanisms.webhook import WebhookMechanism

__all__ = [
    "MECHANISM_NAMES",
    "MECHANISM_TYPES",
    "HandleCallback",
    "Launch",
    "Mechanism",
    "MechanismError",
    "MechanismName",
    "ProbeResult",
    "config_model_of",
    "default_mechanisms",
    "parse_config",
    "validate_target_config",
]

MECHANISM_TYPES: tuple[type[Mechanism], ...] = (
    LocalMechanism,
    SshMechanism,
    KubernetesMechanism,
    GithubActionsMechanism,
    WebhookMechanism,
)
MECHANISM_NAMES: tuple[str, ...] = tuple(kind.name for kind in MECHANISM_TYPES)
_BY_NAME: dict[str, type[Mechanism]] = {kind.name: kind for kind in MECHANISM_TYPES}
MECHANISM_RULE = f"must be one of {', '.join(MECHANISM_NAMES)}"


def _known(name: str) -> str:
    if name not in _BY_NAME:
        raise ValueError(MECHANISM_RULE)
    return name


MechanismName = Annotated[
    str,
    AfterValidator(_known),
    WithJsonSchema({"type": "string", "enum": list(MECHANISM_NAMES), "description": "spin-up mechanism"}),
]
"""A mechanism name as Weft's API accepts it (validated, and listed in the OpenAPI schema)."""


def default_mechanisms(log_root: Path | None = None) -> dict[str, Mechanism]:
    """One instance of every mechanism, by name: what a Weft starts agents with."""
    return {kind.name: kind.create(log_root) for kind in MECHANISM_TYPES}


def config_model_of(mechanism: str) -> type[MechanismConfig]:
    kind = _BY_NAME.get(mechanism)
    if kind is None:
        raise InvalidTargetConfig([FieldError("mechanism", MECHANISM_RULE)])
    return kind.config_model


def parse_config(mechanism: str, config: dict[str, Any]) -> MechanismConfig:
    """The typed config of ``mechanism``; :class:`InvalidTargetConfig` names each bad field."""
    return validate_config(config_model_of(mechanism), config)


def validate_target_config(mechanism: str, config: dict[str, Any]) -> dict[str, Any]:
    """Validate and normalise a target's ``config`` for its mechanism (what the target store keeps)."""
    return parse_config(mechanism, config).model_dump(mode="json", exclude_defaults=True)
