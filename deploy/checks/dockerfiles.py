"""Dockerfile checks: hadolint (every rule, style included) plus the image rules
hadolint does not enforce: multi-stage, an exactly pinned base, a non-root final
user and a HEALTHCHECK."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from deploy.checks.common import DEPLOY, REPO, Finding, display, find_tool, run_tool

CHECK = "dockerfile"
HADOLINT_CONFIG = DEPLOY / "docker" / ".hadolint.yaml"
# An exact tag carries a full x.y.z version (python:3.11.13-slim-bookworm); a digest pins anything.
_EXACT_TAG = re.compile(r":[^/@]*\d+\.\d+\.\d+[^/@]*$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_ARG = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


@dataclass
class Stage:
    base: str
    alias: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line:
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        result.append((word.upper(), rest.strip()))
    return result


def stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the build stages, in order."""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for word, rest in instructions(text):
        if word == "FROM":
            parts = [p for p in rest.split() if not p.startswith("--")]
            base = parts[0] if parts else ""
            alias = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            found.append(Stage(base=base, alias=alias))
        elif not found and word == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif found:
            found[-1].instructions.append((word, rest))
    return args, found


def _expand(value: str, args: dict[str, str]) -> str:
    return _ARG.sub(lambda m: args.get(m.group(1), m.group(0)), value)


def policy(path: Path, context: Path = REPO) -> list[Finding]:
    """The image rules; COPY sources are looked up in ``context`` (the repository root)."""
    where = display(path)
    text = path.read_text(encoding="utf-8")
    args, found = stages(text)
    problems: list[str] = []
    if len(found) < 2:
        problems.append("must be a multi-stage build (a build stage and a runtime stage)")
    aliases = {s.alias for s in found if s.alias}
    for stage in found:
        image = _expand(stage.base, args)
        if image in aliases or image == "scratch":
            continue
        if "$" in image:
            problems.append(f"FROM {stage.base}: the base image depends on an ARG without a default")
        elif not (_DIGEST.search(image) or _EXACT_TAG.search(image)):
            problems.append(
                f"FROM {image}: pin the base image to an exact version tag (x.y.z) or a sha256 digest"
            )
    for stage in found:
        for word, rest in stage.instructions:
            if word not in ("COPY", "ADD") or "--from=" in rest:
                continue
            sources = [p for p in rest.split() if not p.startswith("--")][:-1]
            problems += [
                f"{word} {s}: not in the build context" for s in sources if not (context / s).exists()
            ]
    if found:
        final = found[-1]
        users = [rest for word, rest in final.instructions if word == "USER"]
        if not users:
            problems.append("the final stage must switch to a non-root USER")
        else:
            user = users[-1].split(":")[0].strip()
            if user in ("root", "0", ""):
                problems.append(f"the final stage runs as root (USER {users[-1]})")
        checks = [rest for word, rest in final.instructions if word == "HEALTHCHECK"]
        if not checks or checks[-1].upper().startswith("NONE"):
            problems.append("the final stage must declare a HEALTHCHECK")
    return [Finding(CHECK, where, p) for p in problems]


def hadolint(path: Path, config: Path = HADOLINT_CONFIG) -> list[Finding]:
    binary = find_tool("hadolint")
    code, output = run_tool([str(binary), "--no-color", "-f", "json", "-c", str(config), str(path)])
    if code == 0:
        return []
    try:
        reports = json.loads(output)
    except ValueError:
        return [Finding("hadolint", display(path), output or f"hadolint exited with {code}")]
    return [
        Finding(
            "hadolint",
            display(path),
            f"line {r.get('line')}: {r.get('code')} {r.get('level')}: {r.get('message')}",
        )
        for r in reports
    ] or [Finding("hadolint", display(path), f"hadolint exited with {code}")]


def check_dockerfile(path: Path) -> list[Finding]:
    return hadolint(path) + policy(path)
