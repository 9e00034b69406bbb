"""``/api/notify/sinks``: where a project's notifications go (docs/operator.md,
Notifications). Thin adapters over :mod:`weft.notify`; a sink's URL and secret are never
returned, only replaced. Changing sinks takes the admin scope."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from shared.models import Priority, utcnow
from shared.names import TOKEN_PATTERN, anchored
from weft.deps import ADMIN, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.notify.dispatch import notify_of
from weft.notify.rules import Notice, SinkError, SinkOut, SinkSettings, shown
from weft.notify.send import deliver, understood
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/notify/sinks",
    tags=["notifications"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)

SinkName = Annotated[str, Path(pattern=anchored(TOKEN_PATTERN), description="The sink's name (a token)")]


class SinksOut(BaseModel):
    project_id: str
    items: list[SinkOut] = Field(description="By name; URLs and secrets are never shown")


class TestOut(BaseModel):
    delivered: bool
    error: str | None = Field(description="Why it was not delivered (no URL in it)")


@router.get("", response_model=SinksOut, summary="The project's notification sinks and how they fare")
async def list_sinks(project: ProjectDep) -> SinksOut:
    store = notify_of(project).store
    if not await store.in_use():
        return SinksOut(project_id=project.project_id, items=[])
    sinks, statuses = await store.listing()
    return SinksOut(project_id=project.project_id, items=[shown(s, statuses.get(s.name)) for s in sinks])


@router.put("/{name}", response_model=SinkOut, dependencies=ADMIN, summary="Set a notification sink")
async def put_sink(name: SinkName, settings: SinkSettings, project: ProjectDep) -> SinkOut:
    """Create or replace it (the URL and secret are sent each time, never shown).
    An Apprise URL Apprise does not understand is ``422`` naming ``url``; whether the
    service answers is not checked here (``POST .../test`` sends a test notice)."""
    if settings.kind == "apprise" and not understood(settings.url.get_secret_value()):
        raise SinkError("is not a URL Apprise knows (see its list of services)", field="url", rule="apprise")
    part = notify_of(project)
    stored = await part.store.put(name, settings, by="operator")
    (await part.started()).forget_sinks()
    return shown(stored, await part.store.status(name))


@router.delete("/{name}", status_code=204, dependencies=ADMIN, summary="Remove a notification sink")
async def delete_sink(name: SinkName, project: ProjectDep) -> None:
    part = notify_of(project)
    await part.store.delete(name)
    if part.service is not None:
        part.service.forget_sinks()


@router.post("/{name}/test", response_model=TestOut, dependencies=ADMIN, summary="Send a test notice now")
async def test_sink(name: SinkName, project: ProjectDep) -> TestOut:
    """Sent to this sink alone, whatever its floor and filters, outside the rate and dedupe;
    the outcome is recorded in its status like any other send."""
    part = notify_of(project)
    sink = await part.store.get(name)
    notice = Notice(
        kind="question",
        priority=Priority.P3,
        title=f"Loom: a test notice for sink {name}",
        body=f"Project {project.project_id} sends its notifications here.",
        key=f"test.{utcnow().isoformat()}",
        subject_id=name,
        project_id=project.project_id,
    )
    dispatcher = await part.started()
    error = await deliver(sink, notice, dispatcher.http, utcnow())
    await part.store.record(name, error)
    return TestOut(delivered=error is None, error=error)
