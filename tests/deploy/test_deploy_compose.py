"""The local-fabric compose file passes its checks; broken copies fail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from deploy.checks.common import DEPLOY
from deploy.checks.compose import check_compose

COMPOSE = DEPLOY / "docker" / "compose.yaml"


def test_compose_passes() -> None:
    assert check_compose(COMPOSE) == []


def test_compose_runs_nats_with_jetstream_and_websocket_and_weft_waits_for_it() -> None:
    data = yaml.safe_load(COMPOSE.read_text())
    nats, weft = data["services"]["nats"], data["services"]["weft"]
    conf = (DEPLOY / "docker" / "nats.conf").read_text()
    assert "jetstream {" in conf and "websocket {" in conf
    assert "js-enabled-only=true" in " ".join(nats["healthcheck"]["test"])
    assert weft["depends_on"]["nats"]["condition"] == "service_healthy"
    assert weft["environment"]["NATS_URL"] == "nats://nats:4222"
    assert weft["build"]["dockerfile"] == "deploy/docker/weft.Dockerfile"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace('"127.0.0.1:8080:8080"', '"8080:8080"'), "127.0.0.1 only"),
        (lambda t: t.replace("image: nats:2.15.1-alpine", "image: nats:latest"), "pin an exact version"),
        (
            lambda t: t.replace(
                "dockerfile: deploy/docker/weft.Dockerfile", "dockerfile: deploy/docker/wft.Dockerfile"
            ),
            "does not exist",
        ),
        (
            lambda t: t.replace("      nats:\n        condition", "      natz:\n        condition"),
            "no service 'natz'",
        ),
        (lambda t: t.replace("      - nats-data:/data", "      - nats-store:/data"), "not declared"),
        (
            lambda t: t.replace("    read_only: true\n", "    read_only: true\n    privileged: true\n"),
            "privileged",
        ),
    ],
    ids=[
        "public-port",
        "unpinned-image",
        "missing-dockerfile",
        "unknown-dependency",
        "undeclared-volume",
        "unknown-key",
    ],
)
def test_broken_compose_fails(docker_copy: Path, edit: Callable[[str], str], expected: str) -> None:
    path = docker_copy / "compose.yaml"
    text = path.read_text()
    assert edit(text) != text
    path.write_text(edit(text))
    messages = [f.message for f in check_compose(path)]
    assert any(expected in m for m in messages), messages


def test_unbroken_copy_passes(docker_copy: Path) -> None:
    # The copy keeps the repo layout around compose.yaml, so the same checks apply.
    assert check_compose(docker_copy / "compose.yaml") == []


def test_broken_nats_conf_fails_nats_server_test(docker_copy: Path) -> None:
    conf = docker_copy / "nats.conf"
    conf.write_text(conf.read_text().replace("store_dir", "store_dirr"))
    messages = [f.message for f in check_compose(docker_copy / "compose.yaml")]
    assert any("store_dirr" in m for m in messages), messages


def test_broken_boundary_policy_fails(docker_copy: Path) -> None:
    (docker_copy / "boundary-policy.yaml").write_text(
        "boundaries:\n  production:\n    allowed_agent_types: [Not A Type]\n"
    )
    messages = [f.message for f in check_compose(docker_copy / "compose.yaml")]
    assert any("boundary-policy.yaml" in m for m in messages), messages
