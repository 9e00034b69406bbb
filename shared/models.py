"""Pydantic models shared by every part: the one definition of each record.

Records are what is stored in JetStream (KV values, stream payloads) and what
Weft's REST API returns, so changing a field here changes the wire format of
the whole fabric.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from shared import names
from shared.artifacts import Artifacts
from shared.base import AnyJson, LoomModel
from shared.limits import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DESCRIPTION_MAX_LENGTH,
    MAX_ATTEMPTS_LIMIT,
    MAX_DEPENDENCIES,
    MAX_REVIEW_ROUNDS,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TASK_ID_MAX_LENGTH,
)
from shared.usage.rules import Budget, UsageEntry


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    """Ids for work items, targets, spin-ups and events: 32 lowercase hex."""
    return uuid.uuid4().hex


def _schema(pattern: str, description: str) -> WithJsonSchema:
    """Advertise a naming rule in the JSON schema (OpenAPI, MCP tool schemas).

    The rule itself is enforced by the field validators, whose messages name
    the field and the rule in words.
    """
    return WithJsonSchema({"type": "string", "pattern": names.anchored(pattern), "description": description})


Token = Annotated[str, _schema(names.TOKEN_PATTERN, names.TOKEN_RULE)]
AgentId = Annotated[str, _schema(names.AGENT_ID_PATTERN, names.AGENT_ID_RULE)]
ProjectId = Annotated[str, _schema(names.PROJECT_ID_PATTERN, names.PROJECT_ID_RULE)]
Handle = Annotated[str, _schema(names.HANDLE_PATTERN, names.HANDLE_RULE)]


def _work_id(value: str) -> str:
    """A work id in a list: the message leaves the field to the list entry's path."""
    if names.is_work_id(value):
        return value
    raise ValueError(f"must be {names.WORK_ID_RULE}")


WorkId = Annotated[str, _schema(names.ID_PATTERN, names.WORK_ID_RULE), AfterValidator(_work_id)]


class Scope(StrEnum):
    PRIVATE = "private"
    PERSONAL = "personal"
    TEAM = "team"
    PUBLIC = "public"


# -- agents --------------------------------------------------------------------


class AgentStatus(StrEnum):
    ONLINE = "online"
    BUSY = "busy"
    OFFLINE = "offline"


HEARTBEATS_BEFORE_STALE = 3


def _token_list(values: list[str], field: str) -> list[str]:
    return sorted({names.validate_token(v, field) for v in values})


class AgentEntry(LoomModel):
    """A registry entry, written by Warp and read by everyone else."""

    agent_id: AgentId
    handle: Handle
    agent_type: Token = "generic"
    project_id: ProjectId
    user_id: str
    hostname: str = ""
    capabilities: list[Token] = Field(default_factory=list)
    boundaries: list[Token] = Field(default_factory=lambda: ["default"])
    status: AgentStatus = AgentStatus.ONLINE
    current_tasks: int = Field(default=0, ge=0)
    max_concurrent_tasks: int = Field(default=1, ge=1, le=1000)
    scope: Scope = Scope.TEAM
    parent_id: str | None = None
    instance: int = 0
    target_id: str | None = None
    spinup_id: str | None = None
    heartbeat_interval_s: float = Field(default=10.0, gt=0)
    registered_at: AwareDatetime = Field(default_factory=utcnow)
    last_heartbeat: AwareDatetime = Field(default_factory=utcnow)
    last_activity: AwareDatetime = Field(default_factory=utcnow)
    metadata: dict[str, str] = Field(default_factory=dict)

    @field_validator("agent_id", "parent_id")
    @classmethod
    def _agent_id(cls, v: str | None) -> str | None:
        return None if v is None else names.validate_agent_id(v)

    @field_validator("handle")
    @classmethod
    def _handle(cls, v: str) -> str:
        return names.validate_handle(v)

    @field_validator("agent_type")
    @classmethod
    def _agent_type(cls, v: str) -> str:
        return names.validate_agent_type(v)

    @field_validator("project_id")
    @classmethod
    def _project(cls, v: str) -> str:
        return names.validate_project_id(v)

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[str]) -> list[str]:
        return _token_list(v, "capabilities")

    @field_validator("boundaries")
    @classmethod
    def _bounds(cls, v: list[str]) -> list[str]:
        return _token_list(v, "boundaries")

    def is_stale(self, now: datetime | None = None) -> bool:
        horizon = timedelta(seconds=self.heartbeat_interval_s * HEARTBEATS_BEFORE_STALE)
        return (now or utcnow()) - self.last_heartbeat > horizon

    def effective_status(self, now: datetime | None = None) -> AgentStatus:
        """Offline when heartbeats stopped, whatever the entry last said."""
        return AgentStatus.OFFLINE if self.is_stale(now) else self.status

    def visible_to(self, *, project_id: str, user_id: str, agent_id: str) -> bool:
        """Visibility by scope (docs/architecture.md, Identity and isolation)."""
        if self.agent_id == agent_id:
            return True
        if self.scope is Scope.PUBLIC:
            return True
        if self.scope is Scope.PERSONAL:
            return self.user_id == user_id
        if self.scope is Scope.TEAM:
            return self.project_id == project_id
        return False

    def redacted_for(self, *, project_id: str, user_id: str) -> AgentEntry:
        """What someone outside the owner's project and user sees: no host or metadata."""
        if self.project_id == project_id or self.user_id == user_id:
            return self
        return self.model_copy(update={"hostname": "", "metadata": {}})


# -- work ----------------------------------------------------------------------


class WorkStatus(StrEnum):
    SUBMITTED = "submitted"
    BLOCKED = "blocked"
    QUEUED = "queued"
    CLAIMED = "claimed"
    IN_PROGRESS = "in-progress"
    WAITING_ON_OPERATOR = "waiting-on-operator"
    IN_REVIEW = "in-review"
    REVIEWING = "reviewing"
    LANDING = "landing"
    MERGING = "merging"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    DEAD_LETTERED = "dead-lettered"


FINAL_WORK_STATES = frozenset(
    {WorkStatus.COMPLETED, WorkStatus.CANCELLED, WorkStatus.EXPIRED, WorkStatus.DEAD_LETTERED}
)


class AttemptError(LoomModel):
    attempt: int
    agent_id: str | None = None
    error: str
    at: datetime = Field(default_factory=utcnow)


class Progress(LoomModel):
    percent: int = Field(default=0, ge=0, le=100)
    note: str = Field(default="", max_length=2000)
    at: datetime = Field(default_factory=utcnow)


class ReviewSpec(LoomModel):
    """A submission's request for review: who reviews, and how many rounds a change gets."""

    capability: Token = Field(description="Reviewers are agents with this capability (never the worker)")
    rounds: int = Field(
        default=1, ge=1, le=MAX_REVIEW_ROUNDS, description="Rejections after which the item fails for good"
    )

    @field_validator("capability")
    @classmethod
    def _cap(cls, v: str) -> str:
        return names.validate_capability(v)


Verdict = Literal["approve", "conditional", "reject"]
"""approve: it counts; conditional: it counts, what is left becomes follow-up items; reject: not yet."""


class ReviewRound(LoomModel):
    """One round: what a worker handed in, and what its reviewer said."""

    round: int = Field(ge=1)
    author: str | None = None
    result: AnyJson = None
    handed_in_at: datetime = Field(default_factory=utcnow)
    reviewer: str | None = None
    verdict: Verdict | None = None
    feedback: str = ""
    score: float | None = None
    reviewed_at: datetime | None = None
    follow_ups: list[str] = Field(default_factory=list, description="Conditional pass: the items it made")


# -- workstreams: the code of an item (docs/workstreams.md) --------------------------

MAX_CHECKPOINTS_KEPT = 50
"""Checkpoints listed on an item (the newest); older ones stay reachable in git."""


class Checkpoint(LoomModel):
    """A snapshot of an item's worktree (tracked, untracked and deleted files), a commit
    on the item's private ref, taken without the agent's cooperation."""

    sha: str = Field(description="The checkpoint commit (its first parent is the branch's head then)")
    at: datetime = Field(default_factory=utcnow)
    attempt: int = Field(ge=0)
    agent_id: str
    files: int = Field(default=0, ge=0, description="Files that differ from the branch's head")


LandingOutcome = Literal["landed", "conflict", "gate-failed", "deferred", "closed", "vetoed", "error"]
MAX_LANDING_ATTEMPTS_KEPT = 20
MAX_LANDING_DETAIL = 4000


class LandingAttempt(LoomModel):
    """One lander's try at an item: what happened, and what the worker needs to know."""

    at: datetime = Field(default_factory=utcnow)
    lander: str
    outcome: LandingOutcome
    batch: int = Field(default=1, ge=1, description="Items built and gated together")
    files: list[str] = Field(default_factory=list, description="The files that conflicted")
    detail: str = Field(
        default="", max_length=MAX_LANDING_DETAIL, description="Why: git's words or the gate's output tail"
    )
    gate_s: float | None = Field(default=None, description="Seconds the gate ran on its last run")
    sha: str | None = Field(default=None, description="The target's commit that holds it (landed)")
    splits: int = Field(
        default=0, ge=0, description="Times the failing batch that held it was split before this outcome"
    )


class Landing(LoomModel):
    """An item on its way to the target branch (docs/landing.md)."""

    target: str = Field(description="The branch it lands on")
    author: str | None = Field(default=None, description="The agent whose work it is")
    queued_at: datetime = Field(default_factory=utcnow)
    failures: int = Field(default=0, ge=0, description="Conflicts and gate failures so far")
    attempts: list[LandingAttempt] = Field(default_factory=list, description="The newest last")
    pending_sha: str | None = Field(
        default=None, description="The target commit a lander is pushing with it (crash recovery)"
    )
    landed_sha: str | None = None
    landed_at: datetime | None = None
    pull_request: int | None = Field(
        default=None, description="Forge mode: the open pull request it waits on (GitHub merges it)"
    )
    pull_request_url: str | None = None
    approved_by: str | None = Field(
        default=None, description="Who answered the coordinator's veto question with land (docs/landing.md)"
    )
    approved_at: datetime | None = None


class Workstream(LoomModel):
    """An item's branch and where its code stands: what the agents working on it read
    and record (branch, recorded base, checkpoints, what was handed in)."""

    branch: str
    base_ref: str = Field(description="The target branch the branch was made from")
    base_sha: str = Field(description="The target's commit the branch was made from")
    head_sha: str | None = Field(default=None, description="The branch's head when last handed in")
    commits: int = Field(default=0, ge=0, description="Commits from the base to the handed-in head")
    files_changed: int = Field(default=0, ge=0)
    insertions: int = Field(default=0, ge=0)
    deletions: int = Field(default=0, ge=0)
    handed_in_at: datetime | None = None
    checkpoints: list[Checkpoint] = Field(default_factory=list, description="The newest first")
    resume_from: str | None = Field(
        default=None,
        description="The checkpoint the next attempt starts from (its files, uncommitted); "
        "none after a hand-in",
    )


# The limits and defaults are shared.limits, which Warp's tool and Shuttle read too (the
# docstring below is published in the OpenAPI document).
class WorkSubmission(LoomModel):
    """What a caller submits (REST ``POST /api/work`` or ``warp_work_broadcast``)."""

    task_id: str = Field(min_length=1, max_length=TASK_ID_MAX_LENGTH)
    description: str = Field(min_length=1, max_length=DESCRIPTION_MAX_LENGTH)
    capability: Token
    boundary: Token = "default"
    priority: int = Field(default=DEFAULT_PRIORITY, ge=PRIORITY_MIN, le=PRIORITY_MAX)
    required_agent_type: Token | None = None
    preferred_agent_type: Token | None = None
    deadline: datetime | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    scope: Scope = Scope.TEAM
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=MAX_ATTEMPTS_LIMIT)
    depends_on: list[WorkId] = Field(
        default_factory=list,
        max_length=MAX_DEPENDENCIES,
        description="Ids of work in the same project that must complete first (until then: blocked)",
    )
    review: ReviewSpec | None = Field(
        default=None, description="Have each result reviewed by another agent before it counts"
    )
    budget: Budget | None = Field(
        default=None,
        description="Cost and/or token limit: usage going over it stops the item (fails for good)",
    )
    isolated: bool = Field(
        default=True,
        description="Work in its own branch and worktree when the project has a repository "
        "(docs/workstreams.md); false: in the agent's own checkout",
    )
    veto: bool | None = Field(
        default=None,
        description='The coordinator\'s veto: an operator answers "land this?" before it lands '
        "(docs/landing.md); null: as the project's repository says",
    )

    @field_validator("review")
    @classmethod
    def _rounds_fit(cls, v: ReviewSpec | None, info: ValidationInfo) -> ReviewSpec | None:
        attempts = info.data.get("max_attempts")
        if v is not None and isinstance(attempts, int) and v.rounds > attempts:
            raise ValueError("rounds must not exceed max_attempts (every round is a worker's attempt)")
        return v

    @field_validator("depends_on")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("depends_on: must not name the same item twice")
        return v

    @field_validator("capability")
    @classmethod
    def _cap(cls, v: str) -> str:
        return names.validate_capability(v)

    @field_validator("boundary")
    @classmethod
    def _boundary(cls, v: str) -> str:
        return names.validate_boundary(v)

    @field_validator("required_agent_type", "preferred_agent_type")
    @classmethod
    def _types(cls, v: str | None) -> str | None:
        return None if v is None else names.validate_agent_type(v)

    @field_validator("deadline")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("deadline must include a timezone (e.g. 2026-01-01T12:00:00Z)")
        return v


class WorkItem(WorkSubmission):
    """The durable work record (KV) and the queue payload."""

    id: str = Field(default_factory=new_id)
    project_id: str
    status: WorkStatus = WorkStatus.SUBMITTED
    attempts: int = Field(default=0, ge=0)
    assigned_to: str | None = None
    submitted_by: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    claimed_at: datetime | None = None
    finished_at: datetime | None = None
    result: AnyJson = None
    artifacts: Artifacts = Field(
        default_factory=list,
        description="Named outputs its agent handed back with the result: text, data, small files, "
        "file URLs (docs/warp.md, Artifacts)",
    )
    direct_reply: bool = Field(
        default=False, description="Its result is a direct answer to whoever asked (an A2A message, no task)"
    )
    error: str | None = None
    errors: list[AttemptError] = Field(default_factory=list)
    progress: Progress | None = None
    waiting_reason: str | None = None
    blocked_on: list[str] = Field(
        default_factory=list, description="The dependencies (of depends_on) that have not completed yet"
    )
    dependents: list[str] = Field(
        default_factory=list, description="Items that depend on this one (their depends_on names it)"
    )
    follow_up_of: str | None = Field(default=None, description="The item whose conditional pass made it")
    failed_dependency: str | None = Field(
        default=None,
        description="The dependency whose failure failed this item; retrying that one revives this one",
    )
    reviews: list[ReviewRound] = Field(
        default_factory=list,
        description="Every round handed in for review: result, reviewer, verdict, feedback",
    )
    review_round: int = Field(default=0, ge=0, description="Rounds handed in since it was (re)submitted")
    question_id: str | None = Field(
        default=None,
        description="The operator's question it waits on: its agent's (waiting-on-operator), or a "
        'lander\'s "land this?" (landing)',
    )
    usage: list[UsageEntry] = Field(
        default_factory=list,
        description="What its agents reported using, per UTC day, agent, target and model",
    )
    traceparent: str | None = Field(
        default=None,
        description="The W3C trace context of its submission: every process's spans for it join this trace",
    )
    workstream: Workstream | None = Field(
        default=None, description="Its branch, base, checkpoints and hand-in (docs/workstreams.md)"
    )
    landing: Landing | None = Field(
        default=None, description="Its way to the target branch: queue, attempts, landed commit"
    )
    reserved_for: str | None = Field(
        default=None,
        description="The one agent that may claim it now (its author, when a landing sent it back); "
        "anyone eligible once that agent is offline",
    )
    simplify: bool = Field(
        default=False,
        description="Its last attempt: the claim hands over only the essentials of its context "
        "(docs/operator.md, Escalation)",
    )
    escalation: Escalation | None = Field(
        default=None,
        description="When it failed every attempt: the diagnostic report, the operator's question "
        "and what was decided (docs/operator.md, Escalation)",
    )

    @property
    def author(self) -> str | None:
        """Who handed in the round under review (a reviewer must be someone else)."""
        return self.reviews[-1].author if self.reviews else None

    @model_validator(mode="after")
    def _assigned(self) -> WorkItem:
        if self.assigned_to is not None:
            names.validate_agent_id(self.assigned_to, "assigned_to")
        if self.reserved_for is not None:
            names.validate_agent_id(self.reserved_for, "reserved_for")
        return self


# -- questions to the operator ------------------------------------------------

MAX_QUESTION = 4000
MAX_ANSWER = 8000
MAX_CHOICES = 20
MAX_CHOICE = 200
NO_ANSWER = "no answer before the deadline"


class QuestionStatus(StrEnum):
    OPEN = "open"
    ANSWERED = "answered"
    EXPIRED = "expired"
    LOGGED = "logged"
    """Recorded only (the autonomy policy's ``log`` mode): nobody is asked."""


class Priority(StrEnum):
    """How urgent a question is (docs/operator.md): P0 stops work, P3 is only logged by default."""

    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"


class QuestionMode(StrEnum):
    """What the project's autonomy policy does with a question (docs/operator.md)."""

    SYNC = "sync"
    """The item waits for a person's answer."""
    ASYNC = "async"
    """A person is told; the agent goes on and reads the answer when it comes."""
    BYPASS = "bypass"
    """The agent's default answers it after a short window, unless a person answers first."""
    LOG = "log"
    """Recorded only."""


class Question(LoomModel):
    """One question and, once there is one, its answer (or why there is none)."""

    id: str = Field(default_factory=new_id)
    project_id: str
    asked_by: str
    """The asking agent's id."""
    asked_by_handle: str = ""
    question: str = Field(min_length=1, max_length=MAX_QUESTION)
    choices: list[str] = Field(default_factory=list, max_length=MAX_CHOICES)
    work_id: str | None = None
    deadline: datetime | None = None
    priority: Priority = Priority.P0
    category: str | None = Field(None, description=f"What the question is about: {names.TOKEN_RULE}")
    default_answer: str | None = Field(
        None, max_length=MAX_ANSWER, description="What the agent does if nobody answers (bypass, log)"
    )
    mode: QuestionMode = QuestionMode.SYNC
    """What the project's autonomy policy made of it when it was asked."""
    decide_at: datetime | None = None
    """bypass: when the default answers it, unless a person answers first."""
    deferred_until: datetime | None = None
    """A person put it off until then: it stays open, listed after the others until then."""
    deferred_by: str | None = None
    reminded_at: datetime | None = None
    """sync: when people were last reminded of it (the autonomy policy's ``renotify_s``)."""
    status: QuestionStatus = QuestionStatus.OPEN
    answer: str | None = None
    answered_by: str | None = None
    resolution: str | None = None
    """In words, for the agent: who answered, or that nobody did before the deadline."""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    resolved_at: datetime | None = None

    @field_validator("choices")
    @classmethod
    def _choices(cls, v: list[str]) -> list[str]:
        for choice in v:
            if not choice.strip() or len(choice) > MAX_CHOICE:
                raise ValueError(f"each choice must be 1-{MAX_CHOICE} characters of text")
        if len(set(v)) != len(v):
            raise ValueError("must not repeat a choice")
        return v

    @field_validator("category")
    @classmethod
    def _category(cls, v: str | None) -> str | None:
        return None if v is None else names.validate_token(v, "category")


# -- escalation of work that failed every attempt ----------------------------


class AttemptReport(LoomModel):
    """One failed attempt in a diagnostic report."""

    attempt: int
    agent_id: str | None = None
    error: str
    at: datetime
    seconds: float | None = Field(default=None, description="From its claim to its failure, when traced")


class Diagnosis(LoomModel):
    """What Weft found when an item failed every attempt (docs/operator.md, Escalation)."""

    attempts: list[AttemptReport] = Field(default_factory=list)
    total_s: float = Field(ge=0, description="From its submission to its dead letter")
    spans: int = Field(default=0, ge=0, description="Spans its trace holds")
    failed_spans: int = Field(default=0, ge=0)
    seconds_by_operation: dict[str, float] = Field(
        default_factory=dict, description="Time its trace spent per operation (the slowest first)"
    )
    branch: str | None = None
    checkpoint: str | None = Field(default=None, description="Its workstream's last checkpoint commit")
    written_at: datetime = Field(default_factory=utcnow)


class Escalation(LoomModel):
    """An item that failed every attempt, put to the operator as a question."""

    failed_at: datetime
    """The item's ``finished_at`` when it was dead-lettered: one escalation per dead letter."""
    question_id: str
    priority: Priority
    report: Diagnosis
    decision: str | None = Field(
        default=None, description="retry, instructions, capability, agent-type, skip or cancel"
    )
    decided_by: str | None = None
    decided_at: datetime | None = None


WorkItem.model_rebuild()


# -- targets and spin-up -------------------------------------------------------


class TargetHealth(StrEnum):
    UNKNOWN = "unknown"
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


class HealthCheck(LoomModel):
    interval_s: float = Field(default=60.0, ge=1, le=86_400)
    timeout_s: float = Field(default=10.0, gt=0, le=600)


class TargetSpec(LoomModel):
    """A spin-up target as registered; mechanism-specific ``config`` is
    validated by the spin-up package."""

    name: Token
    agent_type: Token = "generic"
    capabilities: list[Token] = Field(default_factory=list)
    boundaries: list[Token] = Field(default_factory=lambda: ["default"])
    mechanism: Token
    """One of the spin-up mechanisms Weft offers (its registry decides which; ``GET /api/mechanisms``)."""
    config: dict[str, Any] = Field(default_factory=dict)
    max_concurrent: int = Field(default=1, ge=1, le=1000)
    cooldown_s: float = Field(default=0, ge=0, le=86_400)
    idle_timeout_s: float = Field(default=300, ge=0, le=604_800)
    health_check: HealthCheck = Field(default_factory=HealthCheck)
    enabled: bool = True
    tags: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return names.validate_token(v, "name")

    @field_validator("mechanism")
    @classmethod
    def _mechanism(cls, v: str) -> str:
        return names.validate_token(v, "mechanism")

    @field_validator("agent_type")
    @classmethod
    def _agent_type(cls, v: str) -> str:
        return names.validate_agent_type(v)

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[str]) -> list[str]:
        return _token_list(v, "capabilities")

    @field_validator("boundaries")
    @classmethod
    def _bounds(cls, v: list[str]) -> list[str]:
        return _token_list(v, "boundaries")


class Target(TargetSpec):
    id: str = Field(default_factory=new_id)
    project_id: str
    health: TargetHealth = TargetHealth.UNKNOWN
    health_detail: str | None = None
    last_health_check: datetime | None = None
    last_spinup_at: datetime | None = None
    tripped_at: datetime | None = None
    """When its circuit breaker disabled it (its starts kept failing); cleared when enabled again."""
    tripped_reason: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class SpinupState(StrEnum):
    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    REGISTERED = "registered"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


class SpinupOperation(LoomModel):
    id: str = Field(default_factory=new_id)
    project_id: str
    target_id: str
    target_name: str
    agent_id: str
    work_id: str | None = None
    reason: Literal["routing", "manual"] = "manual"
    state: SpinupState = SpinupState.PENDING
    handle: dict[str, str] = Field(default_factory=dict)
    """What the mechanism needs to stop it again: pid, remote pid, Job name, run id."""
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    registered_at: datetime | None = None
    stopped_at: datetime | None = None


# -- file leases (docs/leases.md) --------------------------------------------------

MAX_LEASE_REASON = 500


class LeaseMode(StrEnum):
    EXCLUSIVE = "exclusive"
    """Nobody else may hold any lease overlapping it."""
    SHARED = "shared"
    """Others may hold shared leases on the same paths (readers), no exclusive one."""


class Lease(LoomModel):
    """One agent's lease on paths of the repository (shared/leases/book.py has the rules)."""

    id: str = Field(default_factory=new_id)
    project_id: str
    holder: str
    """The agent id holding it."""
    holder_handle: str = ""
    patterns: list[str]
    """Normalised gitignore-style patterns (shared/leases/patterns.py)."""
    mode: LeaseMode = LeaseMode.EXCLUSIVE
    reason: str = Field(default="", max_length=MAX_LEASE_REASON)
    work_id: str | None = None
    """The work item it serves: the lease ends when the holder no longer holds that item."""
    branch: str | None = None
    """That item's branch when it is worked on in a workstream (docs/workstreams.md): leases
    are project-wide, so they still foresee two branches changing the same paths."""
    token: int = Field(default=0, ge=0)
    """Fencing token: the bucket sequence its grant was stored at (strictly increasing per
    project), kept through renewals. 0 in the stored grant itself: its revision is the token."""
    ttl_s: float
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


EventKind = Literal["work", "agent", "target", "spinup", "question", "lease", "project", "context"]


class Event(LoomModel):
    """Every transition is published as one of these (docs/architecture.md, Work; docs/weft.md, Events)."""

    id: str = Field(default_factory=new_id)
    kind: EventKind
    action: str
    project_id: str
    subject_id: str
    """The work id, agent id, target id, spin-up id or question id the event is about."""
    at: datetime = Field(default_factory=utcnow)
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def type(self) -> str:
        return f"{self.kind}.{self.action}"


# -- channel messages and direct messages --------------------------------------

CHANNEL_HDR_SCOPE = "Loom-Scope"
CHANNEL_HDR_SENDER = "Loom-Sender"
CHANNEL_HDR_USER = "Loom-Sender-User"
"""Headers of a channel message: who sent it with which scope, so reads filter without
decoding bodies."""


class ChannelMessage(LoomModel):
    channel: str
    sender_id: str
    sender_handle: str
    body: str = Field(max_length=64_000)
    scope: Scope = Scope.TEAM
    sent_at: datetime = Field(default_factory=utcnow)
    metadata: dict[str, str] = Field(default_factory=dict)
    reply_to: int | None = None
    """The sequence of the message (same channel) this one answers; its thread is ``thread_id``."""
    thread_id: str | None = None


class DirectMessage(LoomModel):
    id: str = Field(default_factory=new_id)
    sender_id: str
    sender_handle: str
    recipient_id: str
    message_type: str = "text"
    body: str = Field(max_length=64_000)
    sent_at: datetime = Field(default_factory=utcnow)
    metadata: dict[str, str] = Field(default_factory=dict)
    reply_to: str | None = None
    """The id of the direct message this one answers; its thread is ``thread_id``."""
    thread_id: str | None = None


class ControlRequest(LoomModel):
    """Sent by Weft on an agent's control subject."""

    action: Literal["shutdown", "cancel-work"]
    work_id: str | None = None
    """For ``cancel-work``: the item the agent should stop working on."""
    reason: str = ""
    requested_by: str = "weft"
    grace_s: float = Field(default=30, ge=0, le=3600)
