"""A2A tasks are Loom work items: the pure translation both ways (docs/a2a.md).

Nothing here keeps state. A :class:`~a2a.types.Task` is derived from the work
record each time it is asked for (:func:`task_of`), and a ``work.*`` event is
turned into the stream events it means (:class:`StreamTranslator`); a message
becomes a :class:`~shared.models.WorkSubmission` (:func:`submission_of`). The
only A2A data a work item carries is what the record cannot derive: the
context id and the message id, under ``context["a2a"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf import json_format, struct_pb2
from pydantic import ValidationError

from shared.artifacts import ArtifactPart, DataPart, FilePart, TextPart
from shared.errors import Invalid, Problem, describe_problems, shown_name, validation_problems
from shared.models import WorkItem, WorkStatus, WorkSubmission

A2A_KEY: Final = "a2a"
"""Key of ``WorkItem.context`` holding the A2A ids of a task submitted over A2A."""
DATA_KEY: Final = "data"
"""Key of ``WorkItem.context`` holding the message's data parts."""
A2A_ANSWERED_BY = "a2a-client"
"""Who answered an operator question through a follow-up message (a handle, as ``by`` is)."""
RESULT_ARTIFACT: Final = "result"
SUBMITTED_BY: Final = "a2a"

METADATA_FIELDS: Final = tuple(name for name in WorkSubmission.model_fields if name != "description")
"""Message (or request) metadata keys that become fields of the work submission; other
keys belong to the client and are left alone."""

STATE_OF: Final[dict[WorkStatus, TaskState]] = {
    WorkStatus.SUBMITTED: TaskState.TASK_STATE_SUBMITTED,
    WorkStatus.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    WorkStatus.BLOCKED: TaskState.TASK_STATE_SUBMITTED,  # waits for the work it depends on
    WorkStatus.CLAIMED: TaskState.TASK_STATE_WORKING,
    WorkStatus.IN_PROGRESS: TaskState.TASK_STATE_WORKING,
    WorkStatus.IN_REVIEW: TaskState.TASK_STATE_WORKING,  # handed in, waiting for a reviewer
    WorkStatus.REVIEWING: TaskState.TASK_STATE_WORKING,
    WorkStatus.LANDING: TaskState.TASK_STATE_WORKING,  # approved, waiting for a lander
    WorkStatus.MERGING: TaskState.TASK_STATE_WORKING,  # a lander builds, gates and pushes it
    WorkStatus.WAITING_ON_OPERATOR: TaskState.TASK_STATE_INPUT_REQUIRED,  # a message answers it
    WorkStatus.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    WorkStatus.FAILED: TaskState.TASK_STATE_WORKING,  # an attempt failed; see state_of
    WorkStatus.DEAD_LETTERED: TaskState.TASK_STATE_FAILED,
    WorkStatus.EXPIRED: TaskState.TASK_STATE_FAILED,
    WorkStatus.CANCELLED: TaskState.TASK_STATE_CANCELED,
}
"""Work status -> task state (the table in docs/a2a.md)."""

TERMINAL: Final = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)
INTERRUPTED: Final = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})


class A2AInvalid(Invalid):
    """A message that cannot become work; ``problems`` name every field at fault."""

    def __init__(self, problems: list[Problem]) -> None:
        first = problems[0]
        super().__init__(describe_problems(problems), field=first.field)
        self.problems = problems


class A2AMediaTypeUnsupported(A2AInvalid):
    """A part of a media type Loom's work cannot carry (A2A's content-type-not-supported)."""


def _problem(field_name: str, rule: str, kind: type[A2AInvalid] = A2AInvalid) -> A2AInvalid:
    return kind([Problem(field=field_name, message=rule, type="value_error")])


STATE_FILTER_RULE: Final = "must be one of the A2A task states (TASK_STATE_WORKING, ...)"
_STATES: Final = frozenset([*TaskState.keys(), *TaskState.values()])


def check_state_filter(value: object, field_name: str = "status") -> None:
    """A ListTasks ``status`` filter names a task state (its enum name, or its number where
    the binding sends numbers); anything else is refused, never read as "no filter"."""
    if isinstance(value, bool) or not isinstance(value, str | int) or value not in _STATES:
        raise _problem(field_name, STATE_FILTER_RULE)


# -- work item -> task ---------------------------------------------------------------------


def attempts_used(item: WorkItem) -> bool:
    return item.attempts >= item.max_attempts


def state_of(item: WorkItem) -> TaskState:
    """A failed attempt that will be retried keeps the task ``working``; once its attempts are
    used up (it is being dead-lettered) the task is ``failed``."""
    if item.status is WorkStatus.FAILED and attempts_used(item):
        return TaskState.TASK_STATE_FAILED
    return STATE_OF[item.status]


def a2a_ids(item: WorkItem) -> dict[str, str]:
    raw = item.context.get(A2A_KEY)
    if not isinstance(raw, Mapping):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def context_id_of(item: WorkItem) -> str:
    """The A2A context: the one the message named or was given; the work id for work that did
    not come over A2A (each is its own conversation)."""
    return a2a_ids(item).get("context_id") or item.id


def status_text(item: WorkItem) -> str | None:
    """What the agent side of the task has to say about its state, if anything."""
    if item.status is WorkStatus.FAILED:
        if attempts_used(item):
            return f"failed after {item.attempts} attempt(s): {item.error or 'no error given'}"
        return f"attempt {item.attempts} failed ({item.error or 'no error given'}); it will be retried"
    if item.status in (WorkStatus.DEAD_LETTERED, WorkStatus.CANCELLED):
        return item.error
    if item.status is WorkStatus.EXPIRED:
        return "its deadline passed before an agent finished it"
    if item.status is WorkStatus.IN_PROGRESS and item.progress is not None:
        note = f": {item.progress.note}" if item.progress.note else ""
        return f"{item.progress.percent}%{note}"
    if item.status in (WorkStatus.SUBMITTED, WorkStatus.QUEUED):
        return item.waiting_reason
    if item.status is WorkStatus.BLOCKED:
        return f"waiting for {len(item.blocked_on)} item(s) it depends on to complete"
    if item.status in (WorkStatus.IN_REVIEW, WorkStatus.REVIEWING):
        return f"review round {item.review_round}"
    if item.status is WorkStatus.WAITING_ON_OPERATOR:
        return "its agent asked a question: send a message on this task with the answer"
    return None


def _agent_message(item: WorkItem, text: str) -> Message:
    return Message(
        message_id=f"{item.id}-{int(item.updated_at.timestamp() * 1_000_000)}",
        context_id=context_id_of(item),
        task_id=item.id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def status_of(item: WorkItem) -> TaskStatus:
    status = TaskStatus(state=state_of(item))
    text = status_text(item)
    if text:
        status.message.CopyFrom(_agent_message(item, text))
    status.timestamp.FromDatetime(item.updated_at)
    return status


def _value(data: Any) -> struct_pb2.Value:
    return json_format.ParseDict(data, struct_pb2.Value())


def artifacts_of(item: WorkItem) -> list[Artifact]:
    """What completed work hands back: its result (text as a text part, anything else as a
    data part), then each artifact its agent named, in order (an artifact's id is the
    item's id and its position, stable across reads)."""
    if item.status is not WorkStatus.COMPLETED:
        return []
    out: list[Artifact] = []
    if item.result is not None:
        result = item.result
        part = Part(text=result) if isinstance(result, str) else Part(data=_value(result))
        out.append(Artifact(artifact_id=f"{item.id}-{RESULT_ARTIFACT}", name=RESULT_ARTIFACT, parts=[part]))
    for n, artifact in enumerate(item.artifacts, start=1):
        out.append(
            Artifact(
                artifact_id=f"{item.id}-{n}",
                name=artifact.name,
                description=artifact.description or "",
                parts=[_part(p) for p in artifact.parts],
            )
        )
    return out


def _part(part: ArtifactPart) -> Part:
    if isinstance(part, TextPart):
        return Part(text=part.text)
    if isinstance(part, DataPart):
        return Part(data=_value(part.data))
    if isinstance(part, FilePart):
        return Part(raw=part.bytes, filename=part.name, media_type=part.media_type)
    return Part(url=part.url, filename=part.name or "", media_type=part.media_type or "")


def reply_of(item: WorkItem) -> Message | None:
    """Completed work whose agent answered directly (``direct_reply``): its result and the
    parts of its artifacts as one agent message, for a client that waited on its message
    (A2A's answer without a task). None for any other item."""
    if item.status is not WorkStatus.COMPLETED or not item.direct_reply:
        return None
    parts = [part for artifact in artifacts_of(item) for part in artifact.parts]
    message = Message(
        message_id=f"{item.id}-reply",
        context_id=context_id_of(item),
        role=Role.ROLE_AGENT,
        parts=parts or [Part(text="done")],
    )
    message.metadata.update({"loom": loom_metadata(item)})
    return message


def loom_metadata(item: WorkItem) -> dict[str, Any]:
    """The Loom view of the item, under ``metadata["loom"]`` of tasks and events, its keys
    in camelCase as every A2A field is."""
    return {
        "workId": item.id,
        "taskId": item.task_id,
        "status": item.status.value,
        "capability": item.capability,
        "boundary": item.boundary,
        "priority": item.priority,
        "attempts": item.attempts,
        "maxAttempts": item.max_attempts,
        "assignedTo": item.assigned_to,
        "waitingReason": item.waiting_reason,
    }


def user_message(item: WorkItem) -> Message:
    """The message the task started from, as the record keeps it (description + data parts)."""
    parts = [Part(text=item.description)]
    data = item.context.get(DATA_KEY)
    if isinstance(data, list):
        parts.extend(Part(data=_value(d)) for d in data)
    return Message(
        message_id=a2a_ids(item).get("message_id") or item.id,
        context_id=context_id_of(item),
        task_id=item.id,
        role=Role.ROLE_USER,
        parts=parts,
    )


def task_of(item: WorkItem) -> Task:
    task = Task(
        id=item.id, context_id=context_id_of(item), status=status_of(item), history=[user_message(item)]
    )
    task.artifacts.extend(artifacts_of(item))
    task.metadata.update({"loom": loom_metadata(item)})
    return task


def is_terminal(item: WorkItem) -> bool:
    return state_of(item) in TERMINAL


# -- work events -> stream events ------------------------------------------------------


StreamEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


@dataclass
class StreamTranslator:
    """Turns one item's successive states into A2A stream events: a status update when the
    task's state or its status message changes, the artifacts right before
    ``completed``. States older than the last one sent (an event already covered by the
    snapshot a stream started from) are skipped."""

    last: WorkItem | None = None
    until_terminal: bool = False
    """SubscribeToTask's stream: it stays open through input-required, to a final state."""
    _sent: tuple[int, str | None] | None = field(default=None, init=False)

    def start(self, item: WorkItem) -> Task:
        self.last = item
        self._sent = (state_of(item), status_text(item))
        return task_of(item)

    def update(self, item: WorkItem, action: str) -> list[StreamEvent]:
        if self.last is not None and item.updated_at < self.last.updated_at:
            return []
        self.last = item
        shown = (state_of(item), status_text(item))
        if shown == self._sent:
            return []
        self._sent = shown
        out: list[StreamEvent] = [
            TaskArtifactUpdateEvent(
                task_id=item.id, context_id=context_id_of(item), artifact=artifact, last_chunk=True
            )
            for artifact in artifacts_of(item)
        ]
        update = TaskStatusUpdateEvent(
            task_id=item.id, context_id=context_id_of(item), status=status_of(item)
        )
        update.metadata.update({"loom": {**loom_metadata(item), "action": action}})
        out.append(update)
        return out

    @property
    def finished(self) -> bool:
        """The last state sent ends the stream: a final one, or (but for a subscription)
        waiting for the client's input."""
        if self._sent is None:
            return False
        return self._sent[0] in TERMINAL or (not self.until_terminal and self._sent[0] in INTERRUPTED)


def item_of_event(event: Mapping[str, Any]) -> WorkItem | None:
    """The work item a ``work.*`` event carries (None for an event without a readable one)."""
    data = event.get("data")
    raw = data.get("item") if isinstance(data, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    try:
        return WorkItem.model_validate(raw)
    except ValidationError:
        return None


# -- message -> work submission -----------------------------------------------------------


def _struct(value: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(value) if value.fields else {}


def text_of_parts(message: Message) -> str:
    """The message's text parts, joined (how an answer to an operator question travels)."""
    return "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text" and p.text.strip())


def submission_of(
    request: SendMessageRequest, *, context_id: str, default_capability: str | None
) -> WorkSubmission:
    """The work a message asks for: its text parts are the description, its data parts go to
    ``context["data"]``, the Loom fields come from the message's (then the request's) metadata.

    Field names in errors are the A2A ones (``message.parts``, ``metadata.priority``); no
    rejected value is repeated."""
    message = request.message
    texts: list[str] = []
    data: list[Any] = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            data.append(json_format.MessageToDict(part.data))
        else:
            raise _problem(
                f"message.parts.{index}",
                "only text and data parts are accepted (a file's media type is not supported)",
                A2AMediaTypeUnsupported,
            )
    description = "\n".join(t for t in texts if t.strip())
    if not description:
        raise _problem(
            "message.parts", "at least one non-empty text part is required (it describes the work)"
        )

    metadata = {**_struct(message.metadata), **_struct(request.metadata)}
    fields: dict[str, Any] = {k: metadata[k] for k in METADATA_FIELDS if k in metadata}
    if "capability" not in fields:
        if default_capability is None:
            raise _problem("metadata.capability", "required: the capability an agent needs for this work")
        fields["capability"] = default_capability
    context = fields.get("context", {})
    if not isinstance(context, dict):
        raise _problem("metadata.context", "must be an object")
    ids = {"message_id": message.message_id, "context_id": context_id}
    fields["context"] = {
        **context,
        A2A_KEY: {k: v for k, v in ids.items() if v},
        **({DATA_KEY: data} if data else {}),
    }
    fields.setdefault("task_id", (message.message_id or SUBMITTED_BY)[:200])
    fields["description"] = description
    try:
        return WorkSubmission.model_validate(fields)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise A2AInvalid([_renamed(p) for p in problems]) from None


def _renamed(problem: Problem) -> Problem:
    """A submission field as the A2A caller named it."""
    head, _, rest = problem.field.partition(".")
    if head == "description":
        return Problem(field="message.parts", message=problem.message, type=problem.type)
    name = f"metadata.{shown_name(head)}" + (f".{rest}" if rest else "")
    return Problem(field=name, message=problem.message, type=problem.type)
