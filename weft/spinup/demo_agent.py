"""A minimal agent a spin-up target can start: it runs Warp and works through it.

Run as ``python -m weft.spinup.demo_agent`` (as a target's ``command``). It
starts Warp (``warp`` next to this Python, or ``LOOM_WARP_COMMAND``) as an MCP
server over stdio, passing on the spin-up contract it was given
(``NATS_URL``, ``LOOM_PROJECT_ID``, ``LOOM_AGENT_ID``, ``LOOM_TARGET_ID``,
``LOOM_SPINUP_ID``, ``LOOM_CAPABILITIES``, ``LOOM_AUTO_REGISTER=1``, ...), so
Warp registers the agent under the id Weft chose. Then, as an MCP client, it
claims work with ``warp_work_claim`` and completes it with
``warp_work_complete`` (after ``LOOM_DEMO_WORK_S`` seconds, default 0, reporting
50% with ``warp_work_progress`` halfway through when that is not 0), idling
between claims. Given the review capability it also reviews other agents' work
(a claim marked ``review``): it approves it with ``warp_work_review``. A shutdown
request from Weft reaches Warp on its control subject: Warp drains, marks the agent
offline and exits, and so does this runner. Useful as a smoke-test agent for a new
target; the spin-up tests and benchmark use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from shared.redact import configure_logging
from shared.settings import SettingsError, load_loom_settings

log = logging.getLogger("loom.demo-agent")

NATS_NOT_READY_RETRIES = 150


class WarpGone(Exception):
    """Warp exited (after a shutdown request, or it failed)."""


class Stopping(WarpGone):
    """The runner was asked to stop (a signal) between two tries of a call: it leaves as it
    does when Warp has gone."""


DEMO_MODEL = "scripted-demo"
"""The model a demo agent's usage names: a script, not an AI (no cost is reported)."""


def warp_command() -> str:
    return os.environ.get("LOOM_WARP_COMMAND") or str(Path(sys.executable).parent / "warp")


STOP_GRACE_S = 5.0
"""Asked to stop (SIGTERM, SIGINT), the runner lets the step it is in (a claim, a completion)
finish for this long, then abandons it: stopping must not wait on NATS (an abandoned claim is
redelivered)."""


async def call(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any] | None = None,
    stop: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Call a Warp tool; retried while Warp is still reaching NATS, unless asked to stop."""
    for attempt in range(NATS_NOT_READY_RETRIES):
        if stop is not None and stop.is_set():
            raise Stopping(tool)
        try:
            result = await session.call_tool(tool, arguments or {})
        except Exception as exc:  # the transport closed under us: Warp exited
            raise WarpGone(f"{tool}: {type(exc).__name__}") from None
        text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        if not result.is_error:
            return dict(result.structured_content or {})
        if "shutting down" in text:
            raise WarpGone(text)
        if "NATS" not in text:
            raise RuntimeError(f"{tool} failed: {text}")
        if attempt == 0:
            log.info("%s: Warp cannot reach NATS; trying again", tool)
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{tool}: Warp never reached NATS")


async def work_loop(session: ClientSession, stop: asyncio.Event) -> None:
    work_s = float(os.environ.get("LOOM_DEMO_WORK_S", "0"))
    poll_s = float(os.environ.get("LOOM_DEMO_POLL_S", "0.1"))
    while not stop.is_set():
        claim = await call(session, "warp_work_claim", stop=stop)
        item = claim.get("item") if claim.get("claimed") else None
        if not item:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll_s)
            continue
        reviewing = bool(claim.get("review"))
        log.info("claimed %s (%s)%s", item["id"], item["task_id"], " for review" if reviewing else "")
        if reviewing:
            await asyncio.sleep(work_s / 2)
            verdict = {"work_id": item["id"], "verdict": "approve", "feedback": "looks right", "score": 90}
            await call(session, "warp_work_review", verdict)
            continue
        if work_s:
            await asyncio.sleep(work_s / 2)
            await call(
                session, "warp_work_progress", {"work_id": item["id"], "percent": 50, "note": "halfway"}
            )
            await asyncio.sleep(work_s / 2)
        result = {"done_by": os.environ.get("LOOM_AGENT_ID", ""), "task_id": item["task_id"]}
        # what an AI agent reports with its result; scripted here, so `shuttle usage` shows the shape
        usage = {"input_tokens": 1200, "output_tokens": 300, "model": DEMO_MODEL}
        await call(session, "warp_work_complete", {"work_id": item["id"], "result": result, "usage": usage})


async def run() -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    params = StdioServerParameters(command=warp_command(), env=dict(os.environ), cwd=os.getcwd())
    async with (
        stdio_client(params, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        worker = asyncio.create_task(work_loop(session, stop), name="demo-work")
        stopping = asyncio.create_task(stop.wait(), name="demo-stop")
        await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not worker.done():  # asked to stop: the step under way gets a grace, not forever
            await asyncio.wait({worker}, timeout=STOP_GRACE_S)
            worker.cancel()
        stopping.cancel()
        try:
            await worker
        except Stopping as exc:
            log.info("stopping on request (during %s)", exc)
        except WarpGone as exc:
            log.info("Warp has exited (%s); stopping", exc)
        except asyncio.CancelledError:
            log.info("stopped mid-step (NATS did not answer in time); its item is redelivered")
    return 0


def main() -> None:
    try:
        shared = load_loom_settings()
    except SettingsError as exc:
        print(f"demo-agent: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_logging(shared.log_level)
    sys.exit(asyncio.run(run()))


if __name__ == "__main__":
    main()
