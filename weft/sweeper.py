"""Background sweep: expire waiting work past its deadline (and questions past theirs, or
answer them with their default when their bypass window passed), put dead letters to a
person (``weft/project/escalation.py``), repair what a stopped process
left undone (``weft/project/repair.py``), re-route waiting work, delete finished work and
offline agents past their retention, and take a share of A2A push notifications once
some replica has registered a webhook in the project.

Safe with several Weft replicas: every change is compare-and-set on the
record, so two sweepers expiring the same item produce one transition and
one event.
"""

from __future__ import annotations

import asyncio
import logging

from shared.models import QuestionStatus, utcnow
from shared.tasks import raise_if_cancelling, tick
from weft.a2a.push import PUSH_EXTENSION, ProjectPush
from weft.notify.dispatch import NOTIFY_EXTENSION, ProjectNotify
from weft.project.escalation import sweep_escalations
from weft.project.hub import ProjectContext, ProjectHub
from weft.project.notices import announce_bottlenecks, announce_holds, announce_silence
from weft.routing import Router
from weft.settings import WeftSettings

log = logging.getLogger("loom.weft.sweeper")


async def sweep_project(context: ProjectContext, router: Router, settings: WeftSettings) -> dict[str, int]:
    outcome: dict[str, int] = {}
    if context.work.has_expired():
        expired = await context.queue.expire_due()
        outcome["expired"] = len(expired)
    for step, count in (await context.repair.sweep()).items():
        if count:
            outcome[step] = count
    questions = await context.questions.all()  # one read for the steps on questions
    outcome.update(await sweep_escalations(context, questions))
    reminded = await context.questions.remind_due(questions=questions)
    if reminded:
        outcome["questions_reminded"] = len(reminded)
    for question in await context.questions.expire_due(questions=questions):
        step = "questions_expired" if question.status is QuestionStatus.EXPIRED else "questions_defaulted"
        outcome[step] = outcome.get(step, 0) + 1
    announced = await announce_bottlenecks(context)
    if announced:
        outcome["bottlenecks_announced"] = announced
    silent = await announce_silence(context)
    if silent:
        outcome["silence_announced"] = silent
    holds = await announce_holds(context)
    if holds:
        outcome["holds_announced"] = holds
    outcome.update(await router.route_waiting(context))
    token = settings.github_token.get_secret_value() if settings.github_token is not None else None
    forge_settled = await context.forge.sweep(
        context.work, context.repository, context.queue, token, settings.forge_poll_s
    )
    if forge_settled:
        outcome["forge_settled"] = forge_settled
    push = context.extension(PUSH_EXTENSION, ProjectPush)
    if push is not None and await push.start_if_in_use():
        outcome["a2a_push_started"] = 1  # another replica registered a webhook: send its share too
    notify = context.extension(NOTIFY_EXTENSION, ProjectNotify)
    if notify is not None and await notify.start_if_in_use():
        outcome["notify_started"] = 1  # another replica set a sink: send its share too
    purged = await context.contexts.purge_due(utcnow())
    if purged:
        outcome["contexts_purged"] = len(purged)
    deleted = await context.retention.sweep(settings.work_retention_s, settings.agent_retention_s)
    for kind, count in deleted.items():
        outcome[f"deleted_{kind}"] = count
        if count:
            context.metrics.records_deleted.labels(context.project_id, kind).inc(count)
    return outcome


async def run_sweeper(hub: ProjectHub, router: Router, settings: WeftSettings) -> None:
    while True:
        await tick(settings.sweep_interval_s)
        for context in hub.served():
            try:
                await sweep_project(context, router, settings)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise_if_cancelling()
                log.warning("sweep of project %s failed: %s", context.project_id, exc)
