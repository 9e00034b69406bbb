"""Boundary policy parsing and decisions (shared.work.policy)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from shared.names import ProjectNames
from shared.work.policy import (
    BoundaryPolicy,
    PolicyError,
    config_bucket,
    load_policy_file,
    parse_policy,
    publish_policy,
    read_policy,
)

YAML = """
default:
  denied_agent_types: [untrusted]
boundaries:
  corporate:
    allowed_agent_types: [copilot]
    allowed_targets: [corp-runner]
"""


def test_yaml_policy_decisions() -> None:
    policy = parse_policy(YAML)
    assert policy.allows_agent("corporate", "copilot")
    assert not policy.allows_agent("corporate", "claude-code")
    assert policy.allows_agent("default", "claude-code")
    assert not policy.allows_agent("default", "untrusted")
    assert policy.allows_target("corporate", "corp-runner", "copilot")
    assert not policy.allows_target("corporate", "other", "copilot")
    assert not policy.allows_target("corporate", "corp-runner", "claude-code")


def test_json_and_empty_policies() -> None:
    assert parse_policy('{"boundaries": {"x": {"denied_agent_types": ["a"]}}}').allows_agent("x", "b")
    assert parse_policy("").allows_agent("anything", "any-type")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("boundaries: [1, 2]", "boundaries"),
        ("boundaries:\n  Bad.Name: {}", "boundaries.Bad.Name"),
        ("default:\n  allowed_agent_types: ['no spaces']", "agent type"),
        ("default:\n  unknown_key: 1", "unknown_key"),
        ("- a list", "top level must be a mapping"),
        ("{not json", "not valid JSON or YAML"),
    ],
)
def test_bad_policies_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace(".", r"\.").replace("[", r"\[")):
        parse_policy(text, "policy.yaml")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy_file(tmp_path / "nope.yaml")
    good = tmp_path / "p.yaml"
    good.write_text(YAML)
    assert "corporate" in load_policy_file(good).boundaries


async def test_published_policy_round_trips(nc: NatsClient, project_id: str) -> None:
    kv = await config_bucket(nc.jetstream(), ProjectNames(project_id))
    assert await read_policy(kv) == BoundaryPolicy()
    await publish_policy(kv, parse_policy(YAML))
    assert not (await read_policy(kv)).allows_agent("corporate", "claude-code")
