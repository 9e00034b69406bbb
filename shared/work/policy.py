"""Boundary policy: which agent types and targets may take which boundary.

Weft loads the policy from a YAML or JSON file and publishes it to the
project's config bucket; every claim (in Warp or anywhere else) checks it
there, so the policy holds even for work that never passed through Weft.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import Field, ValidationError, field_validator

from shared import names
from shared.base import LoomModel
from shared.errors import Invalid, describe_problems, parse_problem, validation_problems
from shared.nats.jetstream import ensure_kv

POLICY_KEY = "boundary-policy"


class PolicyError(Invalid, ValueError):
    """The policy file is unreadable or invalid; the message names the field."""


class BoundaryRule(LoomModel):
    allowed_agent_types: list[str] | None = None
    """None: any agent type not denied."""
    denied_agent_types: list[str] = Field(default_factory=list)
    allowed_targets: list[str] | None = None
    """Target names that may be spun up for this boundary; None: any."""

    @field_validator("allowed_agent_types", "denied_agent_types", "allowed_targets")
    @classmethod
    def _tokens(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [names.validate_token(x, "agent type or target") for x in v]


class BoundaryPolicy(LoomModel):
    """``default`` applies to boundaries without their own rule."""

    version: int = 1
    default: BoundaryRule = Field(default_factory=BoundaryRule)
    boundaries: dict[str, BoundaryRule] = Field(default_factory=dict)

    @field_validator("boundaries")
    @classmethod
    def _boundary_names(cls, v: dict[str, BoundaryRule]) -> dict[str, BoundaryRule]:
        for key in v:
            names.validate_boundary(key, f"boundaries.{key}")
        return v

    def rule_for(self, boundary: str) -> BoundaryRule:
        return self.boundaries.get(boundary, self.default)

    def allows_agent(self, boundary: str, agent_type: str) -> bool:
        rule = self.rule_for(boundary)
        if agent_type in rule.denied_agent_types:
            return False
        return rule.allowed_agent_types is None or agent_type in rule.allowed_agent_types

    def allows_target(self, boundary: str, target_name: str, agent_type: str) -> bool:
        rule = self.rule_for(boundary)
        if not self.allows_agent(boundary, agent_type):
            return False
        return rule.allowed_targets is None or target_name in rule.allowed_targets


Settings = TypeVar("Settings", bound=LoomModel)


def parse_settings(text: str, source: str, model: type[Settings], error: type[Invalid]) -> Settings:
    """A settings file's ``model`` (the boundary policy, the autonomy policy) from JSON or
    YAML text; an empty file is the model's defaults. ``error``: naming ``source`` and the
    fields at fault, never their values."""
    import yaml  # ~80 ms: only a policy file needs it, not every agent's start (issue 38)

    try:
        data: Any = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise error(f"{source}: not valid JSON or YAML: {parse_problem(exc)}") from None
    if data is None:
        return model()
    if not isinstance(data, dict):
        raise error(f"{source}: the top level must be a mapping")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = describe_problems(validation_problems(exc.errors()), limit=20)
        raise error(f"{source}: {problems}") from None


def load_settings_file(path: Path, model: type[Settings], error: type[Invalid], what: str) -> Settings:
    """:func:`parse_settings` of the file at ``path`` (``what``: "policy file", ...)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise error(f"{what} {path}: cannot read: {exc.strerror}") from None
    return parse_settings(text, str(path), model, error)


def parse_policy(text: str, source: str = "policy") -> BoundaryPolicy:
    return parse_settings(text, source, BoundaryPolicy, PolicyError)


def load_policy_file(path: Path) -> BoundaryPolicy:
    return load_settings_file(path, BoundaryPolicy, PolicyError, "policy file")


async def config_bucket(js: JetStreamContext, project: names.ProjectNames) -> KeyValue:
    return await ensure_kv(js, project.config_bucket, history=5)


async def publish_policy(kv: KeyValue, policy: BoundaryPolicy) -> int:
    return int(await kv.put(POLICY_KEY, policy.to_json_bytes()))


async def read_policy(kv: KeyValue) -> BoundaryPolicy:
    """The project's policy, or the permissive default when none was published."""
    try:
        entry = await kv.get(POLICY_KEY)
    except KeyNotFoundError:
        return BoundaryPolicy()
    if not entry.value:
        return BoundaryPolicy()
    return BoundaryPolicy.model_validate_json(entry.value)
