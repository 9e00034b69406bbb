"""Run the agent CLI in its own process group, with a deadline.

The agent starts Warp (and maybe other tools) as children; stopping the whole
group means a timed-out agent cannot leave a Warp process holding a claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("loom.runner")

TERM_GRACE_S = 10.0


@dataclass(frozen=True)
class AgentOutcome:
    exit_code: int | None
    timed_out: bool
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    def describe(self) -> str:
        if self.error:
            return self.error
        if self.timed_out:
            return "the agent did not finish before AGENT_TIMEOUT_S and was stopped"
        if self.exit_code is not None and self.exit_code < 0:
            return f"the agent was killed by signal {-self.exit_code}"
        return f"the agent exited with status {self.exit_code}"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def run_agent(
    argv: list[str], env: Mapping[str, str], timeout_s: float, *, cwd: str | None = None
) -> AgentOutcome:
    """Start ``argv`` (no shell), wait up to ``timeout_s``, then SIGTERM and SIGKILL its group."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return AgentOutcome(
            exit_code=None, timed_out=False, error=f"AGENT_COMMAND: cannot start {argv[0]!r}: {exc.strerror}"
        )
    try:
        code = await asyncio.wait_for(process.wait(), timeout=timeout_s)
    except TimeoutError:
        log.warning("agent still running after %.0f s; stopping it", timeout_s)
        await stop_group(process)
        return AgentOutcome(exit_code=process.returncode, timed_out=True)
    except asyncio.CancelledError:
        await stop_group(process)
        raise
    # The agent is gone; anything it left behind in its group (a stray Warp) goes too.
    _signal_group(process.pid, signal.SIGTERM)
    return AgentOutcome(exit_code=code, timed_out=False)


async def stop_group(process: asyncio.subprocess.Process) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), timeout=TERM_GRACE_S)
    except TimeoutError:
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
    _signal_group(process.pid, signal.SIGKILL)
