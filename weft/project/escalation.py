"""Escalation instead of a silent dead-letter queue (docs/operator.md, Escalation): each
sweep puts every dead letter that was not put to anyone yet to a person, with a
diagnostic report, and repairs escalations a stopped process left half done.

The rules are ``shared/work/escalation.py``; the question and its answer are
``shared/work/questions.py`` (an answer is carried out where it is given). Replicas
sweeping at once escalate each dead letter once: the report is written on the item
compare-and-set before the question is stored.
"""

from __future__ import annotations

import logging
from datetime import datetime

from shared.models import Question, utcnow
from shared.tasks import raise_if_cancelling
from shared.trace.tracing import read_timeline
from shared.work.escalation import diagnose, due_for_escalation, needs_escalation
from weft.project.hub import ProjectContext

log = logging.getLogger("loom.weft.escalation")


async def sweep_escalations(
    context: ProjectContext, questions: list[Question], now: datetime | None = None
) -> dict[str, int]:
    """Escalate the new dead letters (when the autonomy policy escalates at all) and repair
    the escalations under way; ``questions``: the sweep's one read of them all."""
    items = context.work.by_id().values()
    moment = now or utcnow()
    done: dict[str, int] = {}
    fresh = [item for item in items if due_for_escalation(item, moment)]
    if fresh:
        priority = (await context.questions.autonomy.current()).escalation
        for item in fresh:
            if priority is None:
                break  # the project does not escalate: its dead letters only notify
            try:
                spans, _ = await read_timeline(context.nc, context.names, item.id)
                report = diagnose(item, spans, moment)
                if await context.questions.escalate(item, report, priority) is not None:
                    done["escalated"] = done.get("escalated", 0) + 1
            except Exception as exc:
                raise_if_cancelling()
                log.warning("escalating work %s failed: %s", item.id, exc)
    underway = [i for i in items if i.escalation is not None and not needs_escalation(i)]
    if underway:
        try:
            repaired = await context.questions.repair_escalations(underway, questions)
        except Exception as exc:
            raise_if_cancelling()
            log.warning("repairing escalations failed: %s", exc)
            repaired = 0
        if repaired:
            done["escalations_repaired"] = repaired
    return done
