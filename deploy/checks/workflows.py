"""Workflow checks: actionlint (with shellcheck on every ``run:`` script) plus the
contract the github-actions spin-up mechanism relies on (docs/spinup.md, github-actions)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from deploy.checks.common import REPO, Finding, display, find_tool, run_tool

CHECK = "workflow"
REQUIRED_INPUTS = ("correlation_id", "project_id")
# Weft's github-actions mechanism also sends these; an undeclared input makes GitHub refuse the dispatch.
DECLARED_INPUTS = ("work_id", "capability", "agent_id", "target_id", "nats_url")
REQUIRED_SECRETS = ("LOOM_NATS_URL", "LOOM_AGENT_API_KEY")
SCRIPT = "deploy/github-actions/run-agent.sh"


def actionlint(path: Path) -> list[Finding]:
    binary = find_tool("actionlint")
    args = [str(binary), "-no-color", "-format", "{{json .}}", "-pyflakes="]
    try:
        args[1:1] = ["-shellcheck", str(find_tool("shellcheck"))]
    except RuntimeError:
        args[1:1] = ["-shellcheck="]
    code, output = run_tool([*args, str(path)], cwd=REPO)
    if code == 0:
        return []
    try:
        reports: list[dict[str, Any]] = json.loads(output.splitlines()[0]) if output else []
    except (ValueError, IndexError):
        return [Finding("actionlint", display(path), output or f"actionlint exited with {code}")]
    return [
        Finding("actionlint", display(path), f"line {r.get('line')}: {r.get('message')} [{r.get('kind')}]")
        for r in reports
    ] or [Finding("actionlint", display(path), output or f"actionlint exited with {code}")]


def _steps(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    jobs = data.get("jobs") if isinstance(data.get("jobs"), dict) else {}
    found: list[tuple[str, dict[str, Any]]] = []
    for name, job in (jobs or {}).items():
        for step in (job or {}).get("steps") or []:
            if isinstance(step, dict):
                found.append((str(name), step))
    return found


def policy(path: Path) -> list[Finding]:
    """What Weft's github-actions mechanism needs from the workflow."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        return [Finding(CHECK, display(path), f"not valid YAML: {exc}")]
    if not isinstance(data, dict):
        return [Finding(CHECK, display(path), "the workflow must be a mapping")]
    problems: list[str] = []
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    if not isinstance(triggers, dict):
        triggers = {}
    for trigger in ("workflow_dispatch", "workflow_call"):
        spec = triggers.get(trigger)
        if not isinstance(spec, dict):
            problems.append(f"on.{trigger} is missing")
            continue
        inputs = spec.get("inputs") or {}
        for name in REQUIRED_INPUTS:
            if not isinstance(inputs.get(name), dict) or inputs[name].get("required") is not True:
                problems.append(f"on.{trigger}.inputs.{name} must exist and be required")
        for name in DECLARED_INPUTS:
            if not isinstance(inputs.get(name), dict) or inputs[name].get("required") is not False:
                problems.append(f"on.{trigger}.inputs.{name} must exist and be optional")
    call = triggers.get("workflow_call")
    secrets = (call or {}).get("secrets") or {} if isinstance(call, dict) else {}
    for name in REQUIRED_SECRETS:
        if name not in secrets:
            problems.append(f"on.workflow_call.secrets.{name} is missing")
    if "inputs.correlation_id" not in str(data.get("run-name", "")):
        problems.append("run-name must include ${{ inputs.correlation_id }} so Weft can find its own run")
    permissions = data.get("permissions")
    if permissions != {"contents": "read"}:
        problems.append("permissions must be exactly {contents: read}")
    for name, job in (data.get("jobs") or {}).items():
        if not isinstance(job, dict) or "timeout-minutes" not in job:
            problems.append(f"jobs.{name} must set timeout-minutes")
    steps = _steps(data)
    runs = [(job, step) for job, step in steps if SCRIPT in str(step.get("run", ""))]
    if not any("report-failure" not in str(step.get("run")) for _, step in runs):
        problems.append(f"a step must run {SCRIPT} (the runner does the real work)")
    if not any(
        "report-failure" in str(step.get("run")) and "failure()" in str(step.get("if", ""))
        for _, step in runs
    ):
        problems.append(f"a step with `if: failure() || cancelled()` must run {SCRIPT} report-failure")
    script = REPO / SCRIPT
    if not script.is_file() or not os.stat(script).st_mode & stat.S_IXUSR:
        problems.append(f"{SCRIPT} must exist and be executable")
    return [Finding(CHECK, display(path), p) for p in problems]


def check_workflow(path: Path) -> list[Finding]:
    return actionlint(path) + policy(path)
