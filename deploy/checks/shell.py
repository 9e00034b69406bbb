"""Shell script checks: shellcheck, every severity."""

from __future__ import annotations

from pathlib import Path

from deploy.checks.common import Finding, display, find_tool, run_tool


def check_shell(path: Path) -> list[Finding]:
    binary = find_tool("shellcheck")
    code, output = run_tool([str(binary), "--severity=style", "--format=gcc", str(path)])
    if code == 0:
        return []
    lines = [line for line in output.splitlines() if line.strip()] or [f"shellcheck exited with {code}"]
    return [Finding("shellcheck", display(path), line.replace(str(path) + ":", "line ", 1)) for line in lines]
