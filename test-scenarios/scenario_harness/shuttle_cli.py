"""Shuttle as the operator runs it: the ``.venv/bin/shuttle`` console script in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenario_harness.mcp_process import BIN

SHUTTLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ShuttleResult:
    args: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """The one JSON document a ``--json`` run printed (the run must have succeeded)."""
        assert self.exit_code == 0, f"shuttle {' '.join(self.args)} -> {self.exit_code}: {self.stderr}"
        return json.loads(self.stdout)


async def run_shuttle(
    *args: str, api_url: str, project_id: str, home: Path, token: str | None = None, stdin: str | None = None
) -> ShuttleResult:
    """Run ``shuttle *args`` against Weft at ``api_url`` for ``project_id`` (via LOOM_* variables);
    ``home`` (an existing folder) is its HOME, so ``~/.loom`` is the scenario's own."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LOOM_API_URL": api_url,
        "LOOM_PROJECT_ID": project_id,
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    if token:
        env["LOOM_API_TOKEN"] = token
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "shuttle"),
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), SHUTTLE_TIMEOUT_S
        )
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"shuttle {' '.join(args)} did not finish in {SHUTTLE_TIMEOUT_S:g}s") from None
    assert proc.returncode is not None
    return ShuttleResult(tuple(args), proc.returncode, out.decode(), err.decode())
