"""Background sweep: expire queued work past its deadline, re-route waiting work and
delete finished records past their retention.

Safe with several Weft replicas: every change is compare-and-set on the
record, so two sweepers expiring the same item produce one transition and
one event.
"""

from __future__ import annotations

import asyncio
import logging

from weft.project import ProjectContext, ProjectHub
from weft.routing import Router
from weft.tasks import raise_if_cancelling

log = logging.getLogger("loom.weft.sweeper")


async def sweep_project(context: ProjectContext, router: Router, retention_s: float = 0) -> dict[str, int]:
    outcome: dict[str, int] = {}
    if context.work.has_expired():
        expired = await context.queue.expire_due()
        outcome["expired"] = len(expired)
    outcome.update(await router.route_waiting(context))
    outcome["deleted"] = await context.retention.sweep(retention_s)
    if outcome["deleted"]:
        context.metrics.work_records_deleted.labels(context.project_id).inc(outcome["deleted"])
    return outcome


async def run_sweeper(hub: ProjectHub, router: Router, interval_s: float, retention_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        for context in hub.served():
            try:
                await sweep_project(context, router, retention_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise_if_cancelling()
                log.warning("sweep of project %s failed: %s", context.project_id, exc)
