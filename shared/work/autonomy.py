"""A project's autonomy policy: what a question's priority and category make of it
(docs/operator.md, Autonomy policy).

The policy maps a question's priority (P0-P3) and category to a mode: ``sync`` (the item
waits for a person), ``async`` (a person is told, the agent goes on), ``bypass`` (the
agent's default answers it after a short window unless a person answers first) or
``log`` (recorded only). It is one document in the project's config bucket, like the
repository settings, set by an operator (Weft, admin scope; ``shuttle autonomy``; or
``WEFT_AUTONOMY_FILE``) and read by every agent's Warp when it asks, so it holds without
Weft running. The rules here are pure; :class:`AutonomyStore` keeps the document.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from nats.js.client import JetStreamContext
from pydantic import Field, field_validator, model_validator

from shared import names
from shared.base import LoomModel
from shared.errors import Conflict, Invalid, NotFound
from shared.models import Priority, QuestionMode
from shared.names import ProjectNames
from shared.work.documents import DocumentStore, StoredDocument
from shared.work.policy import load_settings_file, parse_settings

AUTONOMY_KEY: Final = "autonomy-policy"
MAX_RULES: Final = 100
FILE_AUTHOR: Final = "file"
"""``updated_by`` of a policy Weft stored from its ``WEFT_AUTONOMY_FILE``."""

DEFAULT_MODES: Final[dict[Priority, QuestionMode]] = {
    Priority.P0: QuestionMode.SYNC,
    Priority.P1: QuestionMode.ASYNC,
    Priority.P2: QuestionMode.BYPASS,
    Priority.P3: QuestionMode.LOG,
}


class AutonomyError(Invalid, ValueError):
    """A policy that breaks a rule (a ``ValueError`` too, so validators report it by field)."""


class AutonomyNotSet(NotFound):
    def __init__(self) -> None:
        super().__init__(
            "this project has no autonomy policy of its own (the default applies)", field="autonomy"
        )


class AutonomyRule(LoomModel):
    """Questions of this category and/or priority take this mode (the first rule that
    matches wins, before the priority's own mode)."""

    category: str | None = Field(None, description=f"The question's category: {names.TOKEN_RULE}")
    priority: Priority | None = None
    mode: QuestionMode

    @field_validator("category")
    @classmethod
    def _category(cls, v: str | None) -> str | None:
        return None if v is None else names.validate_token(v, "category")

    @model_validator(mode="after")
    def _matches_something(self) -> AutonomyRule:
        if self.category is None and self.priority is None:
            raise AutonomyError("must name a category, a priority or both", field="rules", rule="required")
        return self

    def matches(self, priority: Priority, category: str | None) -> bool:
        return (self.priority is None or self.priority is priority) and (
            self.category is None or self.category == category
        )


class AutonomySettings(LoomModel):
    """What an operator sets (``PUT /api/autonomy``)."""

    modes: dict[Priority, QuestionMode] = Field(
        default_factory=lambda: dict(DEFAULT_MODES),
        description="Each priority's mode; a priority left out keeps its default "
        "(P0 sync, P1 async, P2 bypass, P3 log)",
    )
    rules: list[AutonomyRule] = Field(
        default_factory=list,
        max_length=MAX_RULES,
        description="By category and/or priority, checked in order before `modes` "
        '(e.g. {"category": "security", "mode": "sync"})',
    )
    default_priority: Priority = Field(
        default=Priority.P0,
        description="The priority of a question its agent did not rank (P0: a person decides)",
    )
    bypass_after_s: float = Field(
        default=300, ge=1, le=86_400, description="bypass: how long a person has before the default answers"
    )
    bottleneck_dependents: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="An open item this many open items wait on (directly or not) is a bottleneck",
    )
    renotify_s: float = Field(
        default=900,
        ge=5,
        le=7 * 86_400,
        description="sync: people are reminded of an open question this often until it is answered",
    )

    bottleneck_boost: bool = Field(
        default=False,
        description="Raise a bottleneck that waits (queued or blocked) to the highest priority, so "
        "it is the next claim, and routing starts an agent for it when none is free",
    )
    work_silence_s: float | None = Field(
        default=1800,
        ge=1,
        le=7 * 86_400,
        description="A worker holding an item this long without a progress report is announced "
        "(work.silent, a P2 silence notice); null: not watched",
    )
    review_silence_s: float | None = Field(
        default=1800,
        ge=1,
        le=7 * 86_400,
        description="A reviewer holding a review this long without a verdict or progress is announced; "
        "null: not watched",
    )
    escalation: Priority | None = Field(
        default=Priority.P1,
        description="An item that failed every attempt is put to a person as a question of this "
        "priority (P0 or P1; null: it waits in the dead-letter queue without one)",
    )

    @field_validator("escalation")
    @classmethod
    def _urgent(cls, v: Priority | None) -> Priority | None:
        if v not in (None, Priority.P0, Priority.P1):
            raise AutonomyError(
                "must be P0 or P1 (or null: no escalation)", field="escalation", rule="choice"
            )
        return v

    @field_validator("modes")
    @classmethod
    def _all_priorities(cls, v: dict[Priority, QuestionMode]) -> dict[Priority, QuestionMode]:
        return {**DEFAULT_MODES, **v}

    def mode_for(self, priority: Priority, category: str | None) -> QuestionMode:
        for rule in self.rules:
            if rule.matches(priority, category):
                return rule.mode
        return self.modes[priority]


class AutonomyPolicy(StoredDocument, AutonomySettings):
    """The stored document: the settings, and when and by whom they were last changed."""


DEFAULT_POLICY: Final = AutonomyPolicy(updated_by="default")


class Decision(LoomModel):
    """What the policy makes of one question as it is asked."""

    priority: Priority
    mode: QuestionMode
    decide_at: datetime | None = None


def decide(
    policy: AutonomySettings,
    priority: Priority | None,
    category: str | None,
    default_answer: str | None,
    now: datetime,
) -> Decision:
    """The question's mode. ``bypass`` needs the agent's default to answer with: without
    one nobody can decide for the agent, so a person is told and the agent goes on
    (``async``)."""
    ranked = priority or policy.default_priority
    mode = policy.mode_for(ranked, category)
    if mode is QuestionMode.BYPASS:
        if default_answer is None:
            return Decision(priority=ranked, mode=QuestionMode.ASYNC)
        return Decision(priority=ranked, mode=mode, decide_at=now + timedelta(seconds=policy.bypass_after_s))
    return Decision(priority=ranked, mode=mode)


def parse_autonomy(text: str, source: str = "autonomy policy") -> AutonomySettings:
    """A policy from JSON or YAML text (the file Weft can load); errors name the field."""
    return parse_settings(text, source, AutonomySettings, AutonomyError)


def load_autonomy_file(path: Path) -> AutonomySettings:
    return load_settings_file(path, AutonomySettings, AutonomyError, "autonomy file")


class AutonomyStore(DocumentStore[AutonomySettings, AutonomyPolicy]):
    """The project's autonomy policy in its config bucket."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        super().__init__(
            js,
            names,
            key=AUTONOMY_KEY,
            doc_type=AutonomyPolicy,
            field="autonomy",
            stored=lambda settings, by: AutonomyPolicy(**settings.model_dump(), updated_by=by),
        )

    async def current(self) -> AutonomyPolicy:
        """The project's policy, or the default when none was set."""
        return await self.get() or DEFAULT_POLICY

    async def adopt_file(self, settings: AutonomySettings) -> bool:
        """Weft's ``WEFT_AUTONOMY_FILE``: stored for a project that has no policy of its own,
        or whose policy came from the file (so an edited file takes effect at Weft's next
        start); a policy an operator set through the API wins. True when stored."""
        found = await self.get()
        if found is not None and found.updated_by != FILE_AUTHOR:
            return False
        if found is not None and AutonomySettings(**_settings_of(found)) == settings:
            return False
        try:
            await self.put(settings, by=FILE_AUTHOR, expected_revision=found.revision if found else 0)
        except Conflict:  # another replica (or an operator) changed it meanwhile: theirs stands
            return False
        return True


def _settings_of(policy: AutonomyPolicy) -> dict[str, Any]:
    return policy.model_dump(include=set(AutonomySettings.model_fields))
