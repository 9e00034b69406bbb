"""Console scripts as an operator runs them: ``shuttle`` (and ``weft``/``warp`` start-up checks)
as subprocesses of the scenario, with an environment built from scratch."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenario_harness.mcp_process import BIN
from testsupport.serving import CLIENT_TIMEOUT_S
from testsupport.zygote import zygote_env

SHUTTLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ProcessResult:
    args: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """The one JSON document a ``--json`` run printed (the run must have succeeded)."""
        assert self.exit_code == 0, f"{' '.join(self.args)} -> {self.exit_code}: {self.stderr}"
        return json.loads(self.stdout)


ShuttleResult = ProcessResult


async def run_command(
    program: str,
    *args: str,
    env: dict[str, str],
    stdin: str | None = None,
    timeout: float = SHUTTLE_TIMEOUT_S,
) -> ProcessResult:
    """Run ``.venv/bin/<program> *args`` with exactly ``env`` (plus PATH); wait for it to exit."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    proc = await asyncio.create_subprocess_exec(
        str(BIN / program),
        *args,
        env=full_env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), timeout
        )
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{program} {' '.join(args)} did not finish in {timeout:g}s") from None
    assert proc.returncode is not None
    return ProcessResult((program, *args), proc.returncode, out.decode(), err.decode())


async def run_shuttle(
    *args: str, api_url: str, project_id: str, home: Path, token: str | None = None, stdin: str | None = None
) -> ProcessResult:
    """Run ``shuttle *args`` against Weft at ``api_url`` for ``project_id`` (via LOOM_* variables);
    ``home`` (an existing folder) is its HOME, so ``~/.loom`` is the scenario's own."""
    env = {
        "HOME": str(home),
        "LOOM_API_URL": api_url,
        "LOOM_PROJECT_ID": project_id,
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "LOOM_API_TIMEOUT": f"{CLIENT_TIMEOUT_S:g}",
    }
    if token:
        env["LOOM_API_TOKEN"] = token
    env |= zygote_env()  # forked from this process's zygote: the same command, without the imports
    result = await run_command("shuttle", *args, env=env, stdin=stdin)
    return ProcessResult(("shuttle", *args), result.exit_code, result.stdout, result.stderr)
