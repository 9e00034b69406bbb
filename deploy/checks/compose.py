"""Compose file checks (no Docker needed): structure, pinned images, local-only
ports, files that exist, health-gated start order, and the mounted NATS
configuration through ``nats-server -t``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from deploy.checks.common import Finding, display
from deploy.checks.dockerfiles import stages
from deploy.checks.k8s import nats_config_problems
from deploy.checks.kustomize import split_image
from shared.work.policy import PolicyError, load_policy_file

CHECK = "compose"
SERVICE_KEYS = frozenset(
    {
        "image", "build", "command", "entrypoint", "environment", "volumes", "ports", "depends_on",
        "healthcheck", "restart", "profiles", "read_only", "tmpfs", "cap_drop", "security_opt", "user",
    }
)  # fmt: skip


def _dockerfile_has_healthcheck(build: dict[str, Any], base: Path) -> bool:
    dockerfile = (
        base / str(build.get("context", ".")) / str(build.get("dockerfile", "Dockerfile"))
    ).resolve()
    if not dockerfile.is_file():
        return False
    _, found = stages(dockerfile.read_text(encoding="utf-8"))
    return bool(found) and any(word == "HEALTHCHECK" for word, _ in found[-1].instructions)


def _service_problems(name: str, service: Any, services: dict[str, Any], base: Path) -> list[str]:
    if not isinstance(service, dict):
        return [f"services.{name} must be a mapping"]
    problems = [
        f"services.{name}.{key}: unknown or unsupported key" for key in sorted(set(service) - SERVICE_KEYS)
    ]
    build = service.get("build")
    if isinstance(build, dict):
        dockerfile = base / str(build.get("context", ".")) / str(build.get("dockerfile", "Dockerfile"))
        if not dockerfile.is_file():
            problems.append(f"services.{name}.build: {display(dockerfile)} does not exist")
    elif "image" in service:
        _, tag, digest = split_image(str(service["image"]))
        if not digest and (not tag or tag == "latest" or tag.count(".") < 2):
            problems.append(
                f"services.{name}.image {service['image']!r}: pin an exact version (x.y.z) or digest"
            )
    else:
        problems.append(f"services.{name}: needs image or build")
    for port in service.get("ports") or []:
        if not str(port).startswith("127.0.0.1:"):
            problems.append(
                f"services.{name}.ports {port!r}: publish on 127.0.0.1 only (the local fabric has no auth)"
            )
    for volume in service.get("volumes") or []:
        source = str(volume).split(":", 1)[0]
        if source.startswith((".", "/")) and not (base / source).exists():
            problems.append(f"services.{name}.volumes: {source} does not exist")
        elif Path(source).name.startswith("boundary-policy."):
            try:
                load_policy_file(base / source)
            except PolicyError as exc:
                problems.append(f"services.{name}.volumes: {exc}")
    depends = service.get("depends_on") or {}
    for other, condition in depends.items() if isinstance(depends, dict) else ((d, {}) for d in depends):
        target = services.get(other)
        if target is None:
            problems.append(f"services.{name}.depends_on: no service {other!r}")
        elif (
            (condition or {}).get("condition") == "service_healthy"
            and "healthcheck" not in target
            and not (
                isinstance(target.get("build"), dict) and _dockerfile_has_healthcheck(target["build"], base)
            )
        ):
            problems.append(f"services.{name}.depends_on: {other} has no healthcheck to wait for")
    return problems


def _nats_problems(name: str, service: dict[str, Any], base: Path) -> list[str]:
    image = split_image(str(service.get("image", "")))[0]
    if not image.endswith("nats"):
        return []
    problems: list[str] = []
    for volume in service.get("volumes") or []:
        source = str(volume).split(":", 1)[0]
        if source.endswith(".conf") and (base / source).is_file():
            problems += [
                f"services.{name} {source}: {p}"
                for p in nats_config_problems((base / source).read_text(encoding="utf-8"), [])
            ]
    return problems


def check_compose(path: Path) -> list[Finding]:
    where = display(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        return [Finding(CHECK, where, f"not valid YAML: {exc}")]
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict) or not data["services"]:
        return [Finding(CHECK, where, "needs a services mapping")]
    base = path.parent
    services: dict[str, Any] = data["services"]
    problems: list[str] = []
    for name, service in services.items():
        problems += _service_problems(str(name), service, services, base)
        if isinstance(service, dict):
            problems += _nats_problems(str(name), service, base)
    declared = set((data.get("volumes") or {}).keys())
    for name, service in services.items():
        for volume in (service or {}).get("volumes") or []:
            source = str(volume).split(":", 1)[0]
            if not source.startswith((".", "/")) and source not in declared:
                problems.append(f"services.{name}.volumes: named volume {source!r} is not declared")
    return [Finding(CHECK, where, p) for p in problems]
