"""``python -m deploy.checks``: every deploy check on the repository's files
(``make lint-deploy``, part of ``make test``). Exit status 1 when anything fails."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from deploy.checks.common import DEPLOY, Finding, ToolMissingError, display
from deploy.checks.compose import check_compose
from deploy.checks.dockerfiles import check_dockerfile
from deploy.checks.k8s import check_overlay
from deploy.checks.kustomize import OVERLAYS, KustomizeError, differences, load_rendered, overlays, render
from deploy.checks.shell import check_shell
from deploy.checks.workflows import check_workflow


def rendered_is_current(overlay: str) -> list[Finding]:
    """The offline rendering equals the committed output of the real kustomize."""
    where = display(OVERLAYS / overlay)
    try:
        diffs = differences(render(OVERLAYS / overlay), load_rendered(overlay))
    except (KustomizeError, OSError) as exc:
        return [Finding("kustomize", where, str(exc))]
    hint = " (regenerate with: python -m deploy.checks.kustomize --write-rendered)"
    return [Finding("kustomize", where, d + hint) for d in diffs]


def targets() -> list[tuple[Callable[[Path], list[Finding]], Path]]:
    found: list[tuple[Callable[[Path], list[Finding]], Path]] = []
    found += [(check_dockerfile, p) for p in sorted((DEPLOY / "docker").glob("*.Dockerfile"))]
    found += [(check_compose, p) for p in sorted((DEPLOY / "docker").glob("compose*.yaml"))]
    found += [(check_workflow, p) for p in sorted((DEPLOY / "github-actions").glob("*.yml"))]
    found += [(check_shell, p) for p in sorted(DEPLOY.rglob("*.sh"))]
    found += [(check_overlay, DEPLOY / "k8s" / "base")]
    found += [(check_overlay, OVERLAYS / name) for name in overlays()]
    return found


def main() -> int:
    findings: list[Finding] = []
    checked = 0
    try:
        for check, path in targets():
            findings += check(path)
            checked += 1
        for name in overlays():
            findings += rendered_is_current(name)
    except ToolMissingError as exc:
        print(f"deploy checks: {exc}", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding)
    print(f"deploy checks: {checked} files/overlays, {len(findings)} problem(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
