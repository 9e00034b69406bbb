"""``/health`` and ``/metrics``: open (no token), for probes and Prometheus."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from shared.models import AgentStatus, utcnow
from shared.usage.rules import by_agent_target_model, day_of, project_hold
from weft import __version__
from weft.deps import StateDep
from weft.metrics import CONTENT_TYPE, Metrics
from weft.project.hub import ProjectContext
from weft.strictquery import STRICT_QUERY

router = APIRouter(tags=["health"], dependencies=[STRICT_QUERY])
USAGE_SCRAPE_S = 2.0
"""How long a scrape waits for a project's usage counters and budgets."""


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    nats: Literal["connected", "reconnecting", "disconnected"]
    version: str
    project_id: str
    projects_served: int
    started_at: datetime
    uptime_s: float


@router.get(
    "/health",
    response_model=Health,
    summary="Liveness and NATS connectivity",
    responses={503: {"model": Health, "description": "NATS is not connected"}},
)
async def health(state: StateDep) -> Response:
    nc = state.hub.nc
    nats = "connected" if nc.is_connected else ("reconnecting" if nc.is_reconnecting else "disconnected")
    body = Health(
        status="ok" if nats == "connected" else "degraded",
        nats=nats,
        version=__version__,
        project_id=state.settings.project_id,
        projects_served=len(state.hub.served()),
        started_at=state.started_at,
        uptime_s=(utcnow() - state.started_at).total_seconds(),
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if body.status == "ok" else 503)


async def usage_metrics(metrics: Metrics, context: ProjectContext) -> None:
    """The project's usage and budget gauges, from its work records and today's counter."""
    ledger = context.ledger
    now = utcnow()
    doc = await ledger.budgets()
    today = await ledger.day_totals(day_of(now))
    metrics.set_usage(
        context.project_id,
        by_agent_target_model(context.work.mirror.values()),
        today=today,
        budget=doc.project_daily,
        held=project_hold(doc, today, now) is not None,
        paused=doc.paused is not None,
    )


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format"}},
)
async def metrics(state: StateDep) -> Response:
    for context in state.hub.served():
        with contextlib.suppress(Exception):  # a scrape must still answer while NATS is away
            state.metrics.set_queue_depths(context.project_id, await context.queue.queue_depths())
        counts = {status.value: 0 for status in AgentStatus}
        for agent in context.agents.states():
            counts[agent.status.value] += 1
        for status, count in counts.items():
            state.metrics.agents.labels(context.project_id, status).set(count)
        if context.nc.is_connected:
            with contextlib.suppress(Exception):  # NATS may go away meanwhile: bounded
                await asyncio.wait_for(usage_metrics(state.metrics, context), USAGE_SCRAPE_S)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
