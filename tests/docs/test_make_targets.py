"""The README's `make run` installs what Loom runs on and nothing more: a newcomer's first
command does not fetch the linters, type checker, browser driver and fuzzer `make test` uses."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEV_ONLY = {"mypy", "ruff", "playwright", "schemathesis", "pytest", "hypothesis", "aiosmtpd"}


def dry_run(*targets: str) -> list[str]:
    """The commands make would run for ``targets`` from nothing (``-B``: every step out of date)."""
    done = subprocess.run(
        ["make", "-n", "-B", *targets], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.splitlines()


def test_make_run_and_demo_install_only_the_runtime_dependencies() -> None:
    for target in ("run", "demo"):
        installs = [line for line in dry_run(target) if "pip install" in line and "--upgrade pip" not in line]
        assert installs == [".venv/bin/python -m pip install --quiet -e ."], (target, installs)
    tests = [line for line in dry_run("pytest") if "pip install" in line and "--upgrade pip" not in line]
    assert tests == [".venv/bin/python -m pip install --quiet -e '.[dev]'"]


def test_the_runtime_dependencies_hold_no_development_tool() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    name = lambda spec: re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0].lower()  # noqa: E731
    runtime = {name(spec) for spec in project["dependencies"]}
    dev = {name(spec) for spec in project["optional-dependencies"]["dev"]}
    assert not runtime & DEV_ONLY and DEV_ONLY & dev
