"""What notifies whom (docs/operator.md, Notifications): pure rules, no I/O.

An event on the project's events stream becomes a :class:`Notice` (or nothing): a question
a person should hear of (its priority, by the mode the autonomy policy gave it), a
reminder of an unanswered ``sync`` question, an item that failed every attempt (the
dead-letter queue), a landing failure, a disabled target, a bottleneck, a silent worker
or reviewer. A sink (an Apprise URL, or Loom's own signed webhook) takes the notices
at or above its priority floor whose kind it lists. A notice is sent to a sink at most
once within the dedupe window (its :attr:`Notice.key`) and at most ``rate_per_minute``
times in any minute (:func:`admit`); what is dropped stays in the record it came from (the
question, the item).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from shared import names
from shared.base import LoomModel
from shared.errors import Invalid, NotFound
from shared.models import Priority, Question, QuestionMode, WorkItem, utcnow
from shared.text import cut
from shared.work.escalation import is_escalation

NoticeKind = Literal[
    "question", "reminder", "dead-letter", "landing", "target", "bottleneck", "silence", "budget"
]
NOTICE_KINDS: Final[tuple[NoticeKind, ...]] = (
    "question",
    "reminder",
    "dead-letter",
    "landing",
    "target",
    "bottleneck",
    "silence",
    "budget",
)
SinkKind = Literal["apprise", "webhook"]
MAX_URL: Final = 2000
MAX_SINKS: Final = 50
DEDUPE_S: Final = 600.0
"""A notice with the same key reaches a sink once within this window (the marks' TTL)."""
RATE_WINDOW_S: Final = 60
"""The rate limit counts the sends of the last this many seconds (one count per second)."""
TITLE_MAX: Final = 200
BODY_MAX: Final = 2000


class SinkError(Invalid, ValueError):
    """A sink setting that breaks a rule (a ``ValueError`` too, for the model's validators).
    Its URL is a secret: never part of the message."""


class SinkNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("no notification sink with this name in this project", field="name")


def check_sink_url(url: str, kind: SinkKind) -> str:
    """Only the shape: Apprise itself is asked whether it knows the scheme
    (:func:`weft.notify.send.understood`). The message never holds the URL."""
    text = url.strip()
    if not text:
        raise SinkError("must not be empty", field="url", rule="required")
    if len(text) > MAX_URL:
        raise SinkError(f"must be at most {MAX_URL} characters", field="url", rule="length")
    if any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise SinkError("must not contain spaces or control characters", field="url", rule="format")
    parts = urlsplit(text)
    if not parts.scheme or "://" not in text:
        raise SinkError(
            "must be a URL with a scheme (e.g. json://, ntfy://, mailto://)", field="url", rule="scheme"
        )
    if kind == "webhook" and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise SinkError(
            "a webhook sink's URL must be http:// or https:// with a host", field="url", rule="scheme"
        )
    return text


class SinkSettings(LoomModel):
    """What an operator sets for one sink (``PUT /api/notify/sinks/{name}``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    kind: SinkKind = Field(default="apprise", description="apprise, or webhook (Loom's own, signed)")
    url: SecretStr = Field(
        description="apprise: an Apprise URL (json://, ntfy://, slack://, mailto://, ...); webhook: "
        "http(s) URL Loom posts its signed JSON to. A secret: never shown again, only replaced"
    )
    secret: SecretStr | None = Field(
        default=None,
        validate_default=True,
        description="webhook: the HMAC key of X-Loom-Signature-256 (required for webhook)",
    )
    min_priority: Priority = Field(
        default=Priority.P1, description="Notices of this priority or more urgent (P0 is the most)"
    )
    events: list[NoticeKind] | None = Field(
        default=None,
        min_length=1,
        description="Which kinds of notice it takes; null (the default): every kind, kinds added later too",
    )
    rate_per_minute: int = Field(default=30, ge=1, le=6000, description="At most this many sends a minute")
    enabled: bool = True

    @field_validator("url")
    @classmethod
    def _url(cls, v: SecretStr, info: ValidationInfo) -> SecretStr:
        check_sink_url(v.get_secret_value(), info.data.get("kind", "apprise"))
        return v

    @field_validator("secret")
    @classmethod
    def _secret(cls, v: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        webhook = info.data.get("kind") == "webhook"
        if webhook and (v is None or len(v.get_secret_value()) < 16):
            raise SinkError(
                "a webhook sink needs a secret of at least 16 characters", field="secret", rule="required"
            )
        if not webhook and v is not None:
            raise SinkError("only a webhook sink signs with a secret", field="secret", rule="webhook_only")
        return v

    @field_validator("events")
    @classmethod
    def _once(cls, v: list[NoticeKind] | None) -> list[NoticeKind] | None:
        if v is not None and len(set(v)) != len(v):
            raise SinkError("must not repeat a kind", field="events", rule="unique")
        return v


class Sink(SinkSettings):
    """One stored sink: its settings (secrets included: only Weft reads this bucket)."""

    name: str
    updated_at: datetime = Field(default_factory=utcnow)
    updated_by: str = "operator"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return names.validate_token(v, "name")

    def scheme(self) -> str:
        return urlsplit(self.url.get_secret_value()).scheme


class SinkStatus(LoomModel):
    """How a sink's deliveries went (``status.<name>``; best-effort counters, per replica
    read-modify-write)."""

    sent: int = 0
    failed: int = 0
    failing_since: datetime | None = None
    """Set by a failure after a success; cleared by the next success: a dead sink."""
    last_sent_at: datetime | None = None
    last_error_at: datetime | None = None
    last_error: str | None = None
    """Why, in words that hold no URL (the HTTP status or the kind of failure)."""


class SinkOut(LoomModel):
    """A sink as it may be shown: never its URL or secret."""

    name: str
    kind: SinkKind
    scheme: str = Field(description="The URL's scheme only (json, ntfy, mailto, https, ...)")
    min_priority: Priority
    events: list[NoticeKind] | None = Field(description="null: every kind")
    rate_per_minute: int
    enabled: bool
    updated_at: datetime
    updated_by: str
    status: SinkStatus


def shown(sink: Sink, status: SinkStatus | None) -> SinkOut:
    return SinkOut(
        name=sink.name,
        kind=sink.kind,
        scheme=sink.scheme(),
        min_priority=sink.min_priority,
        events=sink.events,
        rate_per_minute=sink.rate_per_minute,
        enabled=sink.enabled,
        updated_at=sink.updated_at,
        updated_by=sink.updated_by,
        status=status or SinkStatus(),
    )


@dataclass(frozen=True)
class Notice:
    """One thing a person should hear of."""

    kind: NoticeKind
    priority: Priority
    title: str
    body: str
    key: str
    """Dedupe: the same key reaches a sink once within :data:`DEDUPE_S`."""
    subject_id: str
    link: str | None = None
    project_id: str = ""

    def payload(self, at: datetime) -> dict[str, Any]:
        """What Loom's own webhook posts (signed)."""
        return {
            "kind": self.kind,
            "priority": self.priority.value,
            "title": self.title,
            "body": self.body,
            "link": self.link,
            "project_id": self.project_id,
            "subject_id": self.subject_id,
            "at": at.isoformat(),
        }


def wants(sink: Sink, notice: Notice) -> bool:
    """The sink takes it: enabled, the kind listed, urgent enough (P0 < P1 < ...)."""
    listed = sink.events is None or notice.kind in sink.events
    return sink.enabled and listed and notice.priority.value <= sink.min_priority.value


def link_to(public_url: str | None, view: str) -> str | None:
    """The console's view (``questions``, ``work/<id>``) where Weft is reached, if it says."""
    return f"{public_url.rstrip('/')}/#{view}" if public_url else None


def question_notice(
    question: Question, action: str, public_url: str | None, project_id: str
) -> Notice | None:
    """A question a person should hear of: asked (every mode but ``log``, which is only
    recorded), or a reminder of an unanswered ``sync`` one."""
    if question.mode is QuestionMode.LOG:
        return None
    who = question.asked_by_handle or question.asked_by[:8]
    waits = {
        QuestionMode.SYNC: "its work waits for your answer",
        QuestionMode.ASYNC: "the agent goes on meanwhile",
        QuestionMode.BYPASS: "the agent's default applies soon unless you answer",
    }[question.mode]
    lines = [question.question]
    if question.choices:
        lines.append("Choices: " + " | ".join(question.choices))
    if question.default_answer is not None:
        lines.append(f"Agent's default: {question.default_answer}")
    lines.append(f"{question.priority.value} {question.mode.value}: {waits}.")
    if question.work_id:
        lines.append(f"About work {question.work_id}.")
    reminded = action == "reminded"
    about = f" ({question.category})" if question.category else ""
    asks = f"{who} asks{about}"
    if is_escalation(question):
        asks = f"Escalation: work {(question.work_id or '')[:8]} failed every attempt; decide"
    title = f"{'Reminder: ' if reminded else ''}[{question.priority.value}] {asks}"
    stamp = question.reminded_at.isoformat() if reminded and question.reminded_at else "asked"
    return Notice(
        kind="reminder" if reminded else "question",
        priority=question.priority,
        title=cut(title, TITLE_MAX),
        body=cut("\n".join(lines), BODY_MAX),
        key=f"question.{question.id}.{stamp}",
        subject_id=question.id,
        link=link_to(public_url, "questions"),
        project_id=project_id,
    )


def dead_letter_notice(item: WorkItem, public_url: str | None, project_id: str) -> Notice:
    """An item that failed every attempt: a person decides (retry or discard)."""
    error = f"\nLast error: {item.error}" if item.error else ""
    return Notice(
        kind="dead-letter",
        priority=Priority.P1,
        title=cut(f"[P1] {item.task_id} failed every attempt ({item.attempts})", TITLE_MAX),
        body=cut(f"{item.description}{error}\nRetry or discard it from the dead-letter queue.", BODY_MAX),
        key=f"dead-letter.{item.id}.{item.attempts}",
        subject_id=item.id,
        link=link_to(public_url, f"work/{item.id}"),
        project_id=project_id,
    )


def landing_notice(item: WorkItem, data: dict[str, Any], public_url: str | None, project_id: str) -> Notice:
    """An item that conflicts with its target or fails the gate: its author tries again
    (P2), or after the project's ``land_failures`` it goes to the dead-letter queue (P1)."""
    final = bool(data.get("final"))
    failures = item.landing.failures if item.landing is not None else 0
    return Notice(
        kind="landing",
        priority=Priority.P1 if final else Priority.P2,
        title=cut(f"[{'P1' if final else 'P2'}] {item.task_id} did not land", TITLE_MAX),
        body=cut(
            f"{item.error or 'landing failed'}\n"
            + (
                "It failed to land too often: it waits in the dead-letter queue."
                if final
                else "Its author tries again."
            ),
            BODY_MAX,
        ),
        key=f"landing.{item.id}.{failures}",
        subject_id=item.id,
        link=link_to(public_url, f"work/{item.id}"),
        project_id=project_id,
    )


def target_notice(data: dict[str, Any], subject_id: str, public_url: str | None, project_id: str) -> Notice:
    """A spin-up target that failed too often in a short time: disabled (a circuit breaker)."""
    target = data.get("target") or {}
    name = str(target.get("name") or subject_id)
    why = str(target.get("tripped_reason") or "it kept failing")
    return Notice(
        kind="target",
        priority=Priority.P1,
        title=cut(f"[P1] spin-up target {name} was disabled", TITLE_MAX),
        body=cut(f"{why}. Enable it again once it is fixed (shuttle targets enable {name}).", BODY_MAX),
        key=f"target.{subject_id}.{target.get('tripped_at')}",
        subject_id=subject_id,
        link=link_to(public_url, "targets"),
        project_id=project_id,
    )


def bottleneck_notice(item: WorkItem, held_up: int, public_url: str | None, project_id: str) -> Notice:
    """An open item many others wait on: worth a person's look (P2)."""
    who = f"held by {item.assigned_to[:8]}" if item.assigned_to else item.status.value
    return Notice(
        kind="bottleneck",
        priority=Priority.P2,
        title=cut(f"[P2] {item.task_id} holds up {held_up} items", TITLE_MAX),
        body=cut(f"{item.description}\nIt is {who}; {held_up} open items wait on it.", BODY_MAX),
        key=f"bottleneck.{item.id}",
        subject_id=item.id,
        link=link_to(public_url, f"work/{item.id}"),
        project_id=project_id,
    )


def silence_notice(item: WorkItem, data: dict[str, Any], public_url: str | None, project_id: str) -> Notice:
    """A worker or reviewer that said nothing for a long while (P2): stuck, or just slow."""
    since = str(data.get("since") or "")
    role = "reviewer" if data.get("role") == "review" else "worker"
    who = item.assigned_to[:8] if item.assigned_to else "nobody"
    return Notice(
        kind="silence",
        priority=Priority.P2,
        title=cut(f"[P2] {item.task_id}: its {role} has been silent since {since[:19]}", TITLE_MAX),
        body=cut(
            f"{item.description}\nHeld by {who} ({item.status.value}), no progress reported since {since}. "
            "Ask it, or cancel the item to hand it to another agent.",
            BODY_MAX,
        ),
        key=f"silence.{item.id}.{since}",
        subject_id=item.id,
        link=link_to(public_url, f"work/{item.id}"),
        project_id=project_id,
    )


def budget_notice(data: dict[str, Any], public_url: str | None, project_id: str) -> Notice:
    """A daily budget reached (P1): new claims (and spin-ups) wait until the next UTC day."""
    target = data.get("target_name") or data.get("target_id")
    whose = f"spin-up target {target}'s" if data.get("scope") == "target" else "the project's"
    until = str(data.get("until") or "")
    return Notice(
        kind="budget",
        priority=Priority.P1,
        title=cut(f"[P1] {whose} daily budget is reached", TITLE_MAX),
        body=cut(
            f"{data.get('reason') or 'a daily budget is reached'}\nNew claims "
            f"{'on its agents ' if target else ''}wait until {until or 'the next UTC day'}; "
            "raise the budget to go on (shuttle budget set).",
            BODY_MAX,
        ),
        key=f"budget.{data.get('scope')}.{data.get('target_id') or ''}.{until}",
        subject_id=str(data.get("target_id") or project_id),
        link=link_to(public_url, "queues"),
        project_id=project_id,
    )


def notice_of(event: dict[str, Any], public_url: str | None) -> Notice | None:
    """The notice an event makes, if any (events as ``shared/events.py`` publishes them)."""
    kind, action, data = event.get("kind"), event.get("action"), event.get("data") or {}
    project_id = str(event.get("project_id") or "")
    try:
        if kind == "question" and action in ("asked", "reminded"):
            return question_notice(
                Question.model_validate(data["question"]), str(action), public_url, project_id
            )
        if kind == "work" and action == "dead-lettered":
            return dead_letter_notice(WorkItem.model_validate(data["item"]), public_url, project_id)
        if kind == "work" and action == "landing-failed":
            return landing_notice(WorkItem.model_validate(data["item"]), data, public_url, project_id)
        if kind == "work" and action == "silent":
            return silence_notice(WorkItem.model_validate(data["item"]), data, public_url, project_id)
        if kind == "work" and action == "bottleneck":
            item = WorkItem.model_validate(data["item"])
            return bottleneck_notice(item, int(data["held_up"]), public_url, project_id)
        if kind == "project" and action == "budget-held":
            return budget_notice(data, public_url, project_id)
        if kind == "target" and action == "tripped":
            return target_notice(data, str(event.get("subject_id") or ""), public_url, project_id)
    except (KeyError, TypeError, ValueError):
        return None
    return None


def admit(sends: dict[int, int], now_s: int, per_minute: int) -> dict[int, int] | None:
    """The sink's send counts by whole second after one more send at ``now_s``, or None when
    it already sent ``per_minute`` in the last :data:`RATE_WINDOW_S` seconds.

    A sliding window, not the clock's minute: a burst across a minute's turn gets no second
    allowance. Seconds counted whole make the window up to a second longer, never shorter,
    so the limit holds in every minute; the counts older than the window are dropped."""
    kept = {second: count for second, count in sends.items() if second > now_s - RATE_WINDOW_S}
    if sum(kept.values()) >= per_minute:
        return None
    kept[now_s] = kept.get(now_s, 0) + 1
    return kept
