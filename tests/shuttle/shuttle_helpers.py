"""Helpers for Shuttle's tests: run the CLI in-process (CliRunner) or as the
real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from shuttle.cli import app
from testsupport.env import without_fabric


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """Invoke the Typer app in-process (CliRunner)."""
    runner = CliRunner()
    result = runner.invoke(app, list(args), input=input, env=env, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)


def run_process(
    *args: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> Result:
    """Run the real ``shuttle`` console script as a subprocess."""
    full_env = without_fabric()
    full_env.update(env or {})
    exe = Path(sys.executable).with_name("shuttle")
    proc = subprocess.run(
        [str(exe), *args], input=input, env=full_env, capture_output=True, text=True, timeout=timeout
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Cli:
    """The CLI bound to one Weft and project through LOOM_* variables."""

    env: dict[str, str]
    weft: Any
    project: str

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        return run(*args, input=input, env={**self.env, **(env or {})})

    def proc(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        return run_process(*args, input=input, env={**self.env, **(env or {})})

    def json(self, *args: str) -> Any:
        """Run with --json; the command must succeed and print exactly one JSON document."""
        result = self(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        full_env = without_fabric()
        full_env.update(self.env)
        full_env.update(env or {})
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("shuttle")), *args],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
