"""Tell the fabric how the run went, through the same work API Warp and Weft use.

* Items the agent still holds (claimed or in progress under its agent id) when
  it fails or exits are failed on its behalf: a real failed attempt, so the
  item is retried or dead-lettered by the normal rules, never lost or stuck.
* When the agent failed before claiming anything, the item stays queued for
  another agent and a ``spinup.failed`` event tells Weft (and watchers) why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from nats.aio.client import Client as NatsClient

from deploy.runner.config import RunnerConfig
from shared.context.store import ContextStore
from shared.events import ensure_events_stream, publish_event
from shared.models import WorkItem, WorkStatus
from shared.names import ProjectNames
from shared.redact import redact
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.queue import WorkQueue
from shared.work.rules import HELD, WorkError, WorkFilter

log = logging.getLogger("loom.runner")


@dataclass
class Report:
    failed: list[str] = field(default_factory=list)
    """Work ids failed on the agent's behalf."""
    work_status: WorkStatus | None = None
    """Status of the work item the run was started for, after the report."""
    event_published: bool = False


def work_queue(nc: NatsClient, names: ProjectNames) -> WorkQueue:
    """The project's work queue as Warp builds it: a failure reported on the agent's behalf
    is recorded in the item's context tree and timeline like the agent's own."""
    js = nc.jetstream()
    contexts, traces, ledger = ContextStore(nc, names, js=js), TraceLog(nc, names), UsageLedger(js, names)
    return WorkQueue(nc, names, js=js, contexts=contexts, traces=traces, ledger=ledger)


async def held_items(queue: WorkQueue, agent_id: str) -> list[WorkItem]:
    page = await queue.list_items(WorkFilter(assigned_to=agent_id), limit=1000)
    return [item for item in page.items if item.status in HELD]


async def work_status(queue: WorkQueue, work_id: str | None) -> WorkStatus | None:
    if work_id is None:
        return None
    try:
        return (await queue.get(work_id)).status
    except WorkError:
        return None


async def report_failure(nc: NatsClient, config: RunnerConfig, reason: str) -> Report:
    """Fail whatever the agent still holds; if it held nothing, publish ``spinup.failed``."""
    names = ProjectNames(config.project_id)
    queue = work_queue(nc, names)
    report = Report()
    message = redact(f"agent run {config.correlation_id} failed: {reason}")[:2000]
    for item in await held_items(queue, config.agent_id):
        try:
            await queue.fail(item.id, config.agent_id, message)
        except WorkError as exc:  # finished or redelivered meanwhile: nothing left to report
            log.info("work %s not failed: %s", item.id, exc.message)
            continue
        report.failed.append(item.id)
        log.warning("work %s failed on behalf of agent %s: %s", item.id, config.agent_id, message)
    report.work_status = await work_status(queue, config.work_id)
    if not report.failed:
        await ensure_events_stream(nc.jetstream(), names)
        await publish_event(
            nc.jetstream(),
            names,
            "spinup",
            "failed",
            config.spinup_id,
            {
                "correlation_id": config.correlation_id,
                "work_id": config.work_id,
                "agent_id": config.agent_id,
                "target_id": config.target_id,
                "error": message,
                "work_status": report.work_status.value if report.work_status else None,
            },
        )
        report.event_published = True
    return report


async def unfinished_after_success(nc: NatsClient, config: RunnerConfig) -> list[WorkItem]:
    """Items a successfully exited agent left claimed: it forgot to complete them."""
    return await held_items(work_queue(nc, ProjectNames(config.project_id)), config.agent_id)
