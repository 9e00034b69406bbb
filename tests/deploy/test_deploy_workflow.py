"""The agent workflow passes actionlint and the github-actions contract; broken copies fail."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from deploy.checks.common import DEPLOY
from deploy.checks.shell import check_shell
from deploy.checks.workflows import REQUIRED_INPUTS, actionlint, check_workflow, policy

WORKFLOW = DEPLOY / "github-actions" / "agent.yml"
SCRIPT = DEPLOY / "github-actions" / "run-agent.sh"
BrokenCopy = Callable[[str, Callable[[str], str]], Path]


def test_workflow_passes_actionlint_and_policy() -> None:
    assert check_workflow(WORKFLOW) == []


def test_workflow_contract() -> None:
    data = yaml.safe_load(WORKFLOW.read_text())
    triggers = data[True]  # YAML 1.1 reads `on` as true
    for trigger in ("workflow_dispatch", "workflow_call"):
        assert set(REQUIRED_INPUTS) <= set(triggers[trigger]["inputs"])
    assert "${{ inputs.correlation_id }}" in data["run-name"]
    job = data["jobs"]["agent"]
    assert 0 < job["timeout-minutes"] <= 360
    run_step = next(s for s in job["steps"] if s.get("run", "").endswith("run-agent.sh run"))
    assert run_step["timeout-minutes"] < job["timeout-minutes"]
    assert run_step["env"]["NATS_URL"] == "${{ secrets.LOOM_NATS_URL || inputs.nats_url }}"
    assert run_step["env"]["AGENT_API_KEY"] == "${{ secrets.LOOM_AGENT_API_KEY }}"
    # The runner's own deadline ends before the step's, so it can still report the failure itself.
    assert float(run_step["env"]["AGENT_TIMEOUT_S"]) < run_step["timeout-minutes"] * 60
    report = next(s for s in job["steps"] if "report-failure" in s.get("run", ""))
    assert "failure()" in report["if"] and "cancelled()" in report["if"]


def test_inputs_reach_the_runner_through_env_not_through_the_script_text() -> None:
    """`${{ inputs.* }}` inside run: would let an input inject shell code."""
    data = yaml.safe_load(WORKFLOW.read_text())
    for step in data["jobs"]["agent"]["steps"]:
        assert not re.search(r"\$\{\{[^}]*(inputs|vars|secrets)\.", step.get("run", "")), step


def test_actionlint_reports_a_bad_expression(broken_copy: BrokenCopy) -> None:
    bad = broken_copy(
        "github-actions/agent.yml", lambda t: t.replace("timeout-minutes: 60", "timeout-minutes: sixty")
    )
    assert [f for f in actionlint(bad) if f.check == "actionlint"]


def test_actionlint_reports_an_undefined_input(broken_copy: BrokenCopy) -> None:
    bad = broken_copy(
        "github-actions/agent.yml",
        lambda t: t.replace("LOOM_WORK_ID: ${{ inputs.work_id }}", "LOOM_WORK_ID: ${{ inputs.work_idd }}"),
    )
    messages = [f.message for f in actionlint(bad)]
    assert any("work_idd" in m for m in messages), messages


def test_actionlint_runs_shellcheck_on_run_scripts(broken_copy: BrokenCopy) -> None:
    bad = broken_copy(
        "github-actions/agent.yml",
        lambda t: t.replace('bash -euo pipefail -c "$AGENT_INSTALL"', "bash -euo pipefail -c $AGENT_INSTALL"),
    )
    messages = [f.message for f in actionlint(bad)]
    assert any("SC2086" in m for m in messages), messages


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("loom-agent ${{ inputs.correlation_id }} ", "loom-agent "), "run-name"),
        (lambda t: t.replace("    timeout-minutes: 60\n", ""), "timeout-minutes"),
        (lambda t: t.replace("  workflow_call:", "  workflow_cal:"), "workflow_call"),
        (
            lambda t: t.replace("if: ${{ failure() || cancelled() }}", "if: ${{ success() }}"),
            "report-failure",
        ),
        (
            lambda t: t.replace("run: deploy/github-actions/run-agent.sh run", "run: echo agent"),
            "run-agent.sh",
        ),
        (lambda t: t.replace("      LOOM_AGENT_API_KEY:", "      OTHER_KEY:"), "LOOM_AGENT_API_KEY"),
        (lambda t: t.replace("  contents: read", "  contents: write"), "permissions"),
    ],
    ids=[
        "run-name",
        "timeout",
        "no-workflow-call",
        "no-failure-report",
        "no-script",
        "no-api-key",
        "permissions",
    ],
)
def test_policy_rejects_broken_copies(
    broken_copy: BrokenCopy, edit: Callable[[str], str], expected: str
) -> None:
    bad = broken_copy("github-actions/agent.yml", edit)
    messages = [f.message for f in policy(bad)]
    assert any(expected in m for m in messages), messages


def test_run_agent_script_passes_shellcheck_and_is_executable() -> None:
    assert check_shell(SCRIPT) == []
    assert SCRIPT.stat().st_mode & 0o111


def test_shellcheck_reports_a_broken_script(broken_copy: BrokenCopy) -> None:
    bad = broken_copy("github-actions/run-agent.sh", lambda t: t.replace('"$@"', "$@"))
    messages = [f.message for f in check_shell(bad)]
    assert any("SC2068" in m for m in messages), messages
