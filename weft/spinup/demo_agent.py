"""A minimal agent that a spin-up target can start: joins, claims, completes, idles.

Run as ``python -m weft.spinup.demo_agent``. It reads the spin-up contract
from the environment (``NATS_URL``, ``LOOM_PROJECT_ID``, ``LOOM_AGENT_ID``,
``LOOM_TARGET_ID``, ``LOOM_SPINUP_ID``, ``LOOM_AGENT_TYPE``,
``LOOM_CAPABILITIES``, ``LOOM_BOUNDARIES``), registers, claims eligible work,
completes it (after ``LOOM_DEMO_WORK_S`` seconds, default 0), and obeys a
shutdown request from Weft on its control subject (or SIGTERM): it finishes
the item it holds, marks itself offline and exits 0. Useful as a smoke-test
agent for a new target, and used by the spin-up tests and benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable

from shared.models import AgentEntry, AgentStatus, ControlRequest, utcnow
from shared.names import ProjectNames
from shared.natsclient import connect
from shared.redact import configure_logging
from shared.registry import Registry
from shared.work import Claimant, WorkQueue

log = logging.getLogger("loom.demo-agent")


def _list(name: str, default: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


async def run() -> int:
    project_id = os.environ["LOOM_PROJECT_ID"]
    agent_id = os.environ["LOOM_AGENT_ID"]
    agent_type = os.environ.get("LOOM_AGENT_TYPE", "generic")
    capabilities = _list("LOOM_CAPABILITIES", "")
    boundaries = _list("LOOM_BOUNDARIES", "default")
    work_s = float(os.environ.get("LOOM_DEMO_WORK_S", "0"))
    heartbeat_s = float(os.environ.get("LOOM_HEARTBEAT_S", "2"))
    poll_s = float(os.environ.get("LOOM_DEMO_POLL_S", "0.1"))

    nc = await connect(name=f"loom-demo-agent-{agent_id[:8]}", mode="service", timeout=10)
    names = ProjectNames(project_id)
    registry = Registry(nc.jetstream(), names)
    work = WorkQueue(nc, names)
    stop = asyncio.Event()

    async def on_control(msg: object) -> None:
        data = getattr(msg, "data", b"")
        try:
            request = ControlRequest.model_validate_json(data)
        except ValueError:
            return
        if request.action == "shutdown":
            log.info("shutdown requested: %s", request.reason)
            stop.set()

    await nc.subscribe(names.control_subject(agent_id), cb=on_control)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    entry = AgentEntry(
        agent_id=agent_id,
        handle=f"demo-{agent_id[:8]}",
        agent_type=agent_type,
        project_id=project_id,
        user_id="0" * 16,
        hostname=socket.gethostname(),
        capabilities=capabilities,
        boundaries=boundaries,
        target_id=os.environ.get("LOOM_TARGET_ID") or None,
        spinup_id=os.environ.get("LOOM_SPINUP_ID") or None,
        heartbeat_interval_s=heartbeat_s,
    )
    await registry.put(entry)
    log.info("registered %s in project %s", agent_id, project_id)

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(heartbeat_s)
            with contextlib.suppress(Exception):
                await registry.heartbeat(agent_id)

    beat = asyncio.create_task(heartbeat())
    claimant = Claimant(agent_id, agent_type, tuple(capabilities), tuple(boundaries))

    def busy(count: int) -> Callable[[AgentEntry], AgentEntry]:
        def change(e: AgentEntry) -> AgentEntry:
            e.current_tasks = count
            e.status = AgentStatus.BUSY if count else AgentStatus.ONLINE
            e.last_activity = utcnow()
            return e

        return change

    try:
        while not stop.is_set():
            item = await work.claim(claimant)
            if item is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll_s)
                continue
            await registry.update(agent_id, busy(1))
            if work_s:
                await asyncio.sleep(work_s)
            await work.complete(item.id, agent_id, {"done_by": agent_id, "task_id": item.task_id})
            await registry.update(agent_id, busy(0))
    finally:
        beat.cancel()
        with contextlib.suppress(Exception):
            await registry.mark_offline(agent_id)
        await nc.drain()
    log.info("agent %s stopped", agent_id)
    return 0


def main() -> None:
    configure_logging(os.environ.get("LOOM_LOG_LEVEL", "INFO"))
    sys.exit(asyncio.run(run()))


if __name__ == "__main__":
    main()
