"""Escalation instead of a silent dead-letter queue (docs/operator.md, Escalation): pure
rules, no I/O.

An item's last attempt is claimed with the *simplify* mark (its hand-off carries only
the essentials of its context, ``shared/work/context.py``). When that attempt fails too,
the item is dead-lettered as before; then Weft writes a :class:`~shared.models.Diagnosis`
on it (:func:`diagnose`) and puts it to a person as a question (:func:`escalate`,
``shared/work/questions.py``). The answer is one of a few decisions (:func:`parse_decision`),
carried out by the work queue (:func:`decide`, then a retry, a discard or a cancel).

It never loops: one escalation per dead letter (its ``failed_at``), asked of a person, not
of an agent, and nothing retries without that person's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from shared import names
from shared.errors import Invalid
from shared.limits import DESCRIPTION_MAX_LENGTH
from shared.models import (
    AttemptReport,
    Diagnosis,
    Escalation,
    Question,
    WorkItem,
    WorkStatus,
)
from shared.trace.timeline import SpanRecord
from shared.work.moves import Change, WorkEvent, WorkRecord, fork

CATEGORY: Final = "escalation"
"""The category of an escalation question (autonomy rules can name it)."""
ASKER: Final = "loom"
"""``asked_by`` of an escalation question: the fabric, not an agent."""
REPORT_AFTER: Final = timedelta(seconds=1)
"""A dead letter is reported on once it is this old: the spans of its last attempt are
published a moment after it (``shared.trace.tracing.FLUSH_AFTER_S``), and the report reads them."""
MAX_INSTRUCTIONS: Final = 4000
REPORTED_ATTEMPTS: Final = 20
REPORTED_OPERATIONS: Final = 10
Action = Literal["retry", "instructions", "capability", "agent-type", "skip", "cancel"]
RETRYING: Final[frozenset[str]] = frozenset({"retry", "instructions", "capability", "agent-type"})
"""Decisions carried out by a retry (after changing the item as they say)."""
OPTIONS: Final = (
    "retry | retry: <new instructions> | capability: <another capability> | "
    "agent type: <another agent type> | skip | cancel"
)


class EscalationError(Invalid):
    """An answer to an escalation that is none of its decisions."""


@dataclass(frozen=True)
class Resolution:
    """A person's decision on an escalated item."""

    action: Action
    value: str | None = None


def _refused(why: str) -> EscalationError:
    return EscalationError(f"answer: {why} (one of: {OPTIONS})", field="answer", rule="choice")


def parse_decision(answer: str) -> Resolution:
    """The decision an answer names; refused naming the field and the options, never
    repeating the answer."""
    head, colon, rest = answer.strip().partition(":")
    word, rest = " ".join(head.lower().replace("-", " ").split()), rest.strip()
    if not colon:
        if word in ("retry", "skip", "cancel"):
            return Resolution(word)  # type: ignore[arg-type]
        raise _refused("must be a decision")
    if word == "retry":
        if not rest:
            raise _refused("retry: needs the new instructions after the colon")
        if len(rest) > MAX_INSTRUCTIONS:
            raise _refused(f"the new instructions must be at most {MAX_INSTRUCTIONS} characters")
        return Resolution("instructions", rest)
    if word == "capability":
        return Resolution("capability", names.validate_token(rest, "answer"))
    if word == "agent type":
        return Resolution("agent-type", names.validate_token(rest, "answer"))
    raise _refused("must be a decision")


def is_escalation(question: Question) -> bool:
    return question.asked_by == ASKER and question.category == CATEGORY


def needs_escalation(item: WorkItem) -> bool:
    """A dead letter of its own failing (not a dependency's) that was not put to anyone yet."""
    return (
        item.status is WorkStatus.DEAD_LETTERED
        and item.failed_dependency is None
        and item.finished_at is not None
        and (item.escalation is None or item.escalation.failed_at != item.finished_at)
    )


def due_for_escalation(item: WorkItem, now: datetime) -> bool:
    """:func:`needs_escalation`, and old enough for its report (:data:`REPORT_AFTER`)."""
    return needs_escalation(item) and item.finished_at is not None and item.finished_at <= now - REPORT_AFTER


def needs_carrying_out(item: WorkItem) -> bool:
    """Decided, but the retry or cancel it asked for did not happen (the process deciding
    stopped between the two steps): still dead-lettered."""
    escalation = item.escalation
    return (
        item.status is WorkStatus.DEAD_LETTERED
        and escalation is not None
        and escalation.failed_at == item.finished_at
        and (escalation.decision in RETRYING or escalation.decision == "cancel")
    )


def diagnose(item: WorkItem, spans: Sequence[SpanRecord], now: datetime) -> Diagnosis:
    """The report on an item that failed every attempt: each attempt's agent, error and
    time (from its claim's span to its failure), and where its trace spent its time."""
    claims = sorted(s.start_ns for s in spans if s.name == "work.claim" and s.status == "ok")
    attempts: list[AttemptReport] = []
    since_ns = 0
    for error in item.errors:
        at_ns = int(error.at.timestamp() * 1e9)
        started = [c for c in claims if since_ns <= c <= at_ns]
        seconds = round((at_ns - started[-1]) / 1e9, 3) if started else None
        attempts.append(
            AttemptReport(
                attempt=error.attempt,
                agent_id=error.agent_id,
                error=error.error,
                at=error.at,
                seconds=seconds,
            )
        )
        since_ns = at_ns
    spent: dict[str, float] = {}
    for span in spans:
        spent[span.name] = spent.get(span.name, 0.0) + span.duration_ns / 1e9
    slowest = sorted(spent.items(), key=lambda pair: -pair[1])[:REPORTED_OPERATIONS]
    workstream = item.workstream
    checkpoint = workstream.checkpoints[0].sha if workstream and workstream.checkpoints else None
    return Diagnosis(
        attempts=attempts[-REPORTED_ATTEMPTS:],
        total_s=round(max(0.0, ((item.finished_at or now) - item.created_at).total_seconds()), 3),
        spans=len(spans),
        failed_spans=sum(1 for s in spans if s.status != "ok"),
        seconds_by_operation={name: round(s, 3) for name, s in slowest},
        branch=workstream.branch if workstream else None,
        checkpoint=checkpoint or (workstream.head_sha if workstream else None),
        written_at=now,
    )


def question_text(item: WorkItem, report: Diagnosis) -> str:
    """What the person is asked: the item, how it failed, and the decisions to answer with."""
    last = item.errors[-1] if item.errors else None
    lines = [
        f"Work {item.id} ({item.task_id}, capability {item.capability}) failed all "
        f"{item.max_attempts} attempts and is in the dead-letter queue.",
    ]
    if last is not None:
        lines.append(f"Last error (attempt {last.attempt}): {last.error[:500]}")
    if report.checkpoint:
        lines.append(f"Its last checkpoint: {report.checkpoint} on {report.branch}.")
    lines.append(f"Answer with one of: {OPTIONS}.")
    return "\n".join(lines)


# -- rules on the record ---------------------------------------------------------------------
def escalate(record: WorkRecord, escalation: Escalation, now: datetime) -> Change:
    """The report and the question written on the dead letter they are about; left alone
    when it was escalated already (another replica) or is no longer that dead letter."""
    item = record.item
    if not needs_escalation(item) or escalation.failed_at != item.finished_at:
        return Change()
    new, changed = fork(record, now)
    changed.escalation = escalation
    data = {"question_id": escalation.question_id, "priority": escalation.priority.value}
    return Change(new, (WorkEvent("escalated", data),))


def decide(record: WorkRecord, question_id: str, resolution: Resolution, by: str, now: datetime) -> Change:
    """The person's decision on the record, with what it changes (new instructions appended
    to the description, another capability or agent type); left alone when it was decided
    already or the item left the dead-letter queue meanwhile (retried by hand)."""
    item = record.item
    escalation = item.escalation
    if (
        escalation is None
        or escalation.question_id != question_id
        or escalation.decision is not None
        or item.status is not WorkStatus.DEAD_LETTERED
    ):
        return Change()
    new, changed = fork(record, now)
    changed.escalation = escalation.model_copy(
        update={"decision": resolution.action, "decided_by": by, "decided_at": now}
    )
    if resolution.action == "instructions" and resolution.value:
        changed.description = _with_instructions(item.description, resolution.value)
    elif resolution.action == "capability" and resolution.value:
        changed.capability = resolution.value
    elif resolution.action == "agent-type" and resolution.value:
        changed.required_agent_type = resolution.value
    data = {"question_id": question_id, "decision": resolution.action, "by": by}
    return Change(new, (WorkEvent("escalation-decided", data),))


INSTRUCTIONS_HEADING: Final = "\n\nNew instructions from the operator (escalation):\n"


def _with_instructions(description: str, instructions: str) -> str:
    """The description with the new instructions after it; the older text is cut (its
    start kept) when both would not fit."""
    room = DESCRIPTION_MAX_LENGTH - len(INSTRUCTIONS_HEADING) - len(instructions)
    kept = description if len(description) <= room else description[: room - 1] + "…"
    return kept + INSTRUCTIONS_HEADING + instructions
