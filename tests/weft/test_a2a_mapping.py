"""The pure A2A <-> work translation (weft/a2a/mapping.py): no NATS, no HTTP."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskArtifactUpdateEvent, TaskState
from google.protobuf import struct_pb2

from shared.artifacts import WorkArtifact
from shared.models import Progress, WorkItem, WorkStatus, utcnow
from weft.a2a.mapping import (
    STATE_OF,
    A2AInvalid,
    StreamTranslator,
    context_id_of,
    reply_of,
    state_of,
    submission_of,
    task_of,
)

S = WorkStatus
T = TaskState


def item(status: WorkStatus = S.QUEUED, **fields: Any) -> WorkItem:
    values: dict[str, Any] = {"task_id": "t", "description": "do it", "capability": "code", "project_id": "p"}
    values.update(fields)
    return WorkItem(status=status, **values)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (S.SUBMITTED, T.TASK_STATE_SUBMITTED),
        (S.QUEUED, T.TASK_STATE_SUBMITTED),
        (S.CLAIMED, T.TASK_STATE_WORKING),
        (S.IN_PROGRESS, T.TASK_STATE_WORKING),
        (S.COMPLETED, T.TASK_STATE_COMPLETED),
        (S.FAILED, T.TASK_STATE_WORKING),
        (S.DEAD_LETTERED, T.TASK_STATE_FAILED),
        (S.EXPIRED, T.TASK_STATE_FAILED),
        (S.CANCELLED, T.TASK_STATE_CANCELED),
    ],
)
def test_every_work_status_has_its_task_state(status: WorkStatus, expected: int) -> None:
    assert state_of(item(status)) == expected
    assert set(STATE_OF) == set(WorkStatus)


def test_a_failed_attempt_is_failed_only_once_the_attempts_are_used_up() -> None:
    retried = item(S.FAILED, attempts=1, max_attempts=3, error="boom")
    last = item(S.FAILED, attempts=3, max_attempts=3, error="boom")
    assert state_of(retried) == T.TASK_STATE_WORKING
    assert "will be retried" in task_of(retried).status.message.parts[0].text
    assert state_of(last) == T.TASK_STATE_FAILED
    assert task_of(last).status.message.parts[0].text == "failed after 3 attempt(s): boom"


def test_task_of_carries_the_result_the_history_and_the_loom_view() -> None:
    done = item(
        S.COMPLETED, result={"commit": "abc"}, context={"a2a": {"context_id": "c1", "message_id": "m1"}}
    )
    task = task_of(done)
    assert (task.id, task.context_id) == (done.id, "c1")
    assert task.history[0].message_id == "m1" and task.history[0].role == Role.ROLE_USER
    assert dict(task.artifacts[0].parts[0].data.struct_value) == {"commit": "abc"}
    assert task.metadata["loom"]["status"] == "completed"
    assert context_id_of(item()) != "" and context_id_of(done) == "c1"


def test_an_agent_s_artifacts_follow_the_result_with_files_and_urls_as_a2a_parts() -> None:
    handed = [
        WorkArtifact.model_validate(
            {
                "name": "report",
                "description": "the test run",
                "parts": [
                    {"kind": "text", "text": "41 passed"},
                    {
                        "kind": "file",
                        "name": "junit.xml",
                        "media_type": "application/xml",
                        "bytes": "PHgvPg==",
                    },
                ],
            }
        ),
        WorkArtifact.model_validate(
            {"name": "build", "parts": [{"kind": "url", "url": "https://ci.example.org/7/app.tar.gz"}]}
        ),
    ]
    done = item(S.COMPLETED, result="fixed", artifacts=handed)
    result, report, build = task_of(done).artifacts
    assert (result.name, result.parts[0].text) == ("result", "fixed")
    assert (report.artifact_id, report.name, report.description) == (f"{done.id}-1", "report", "the test run")
    assert report.parts[0].text == "41 passed"
    file = report.parts[1]
    assert (file.raw, file.filename, file.media_type) == (b"<x/>", "junit.xml", "application/xml")
    assert build.parts[0].url == "https://ci.example.org/7/app.tar.gz" and build.artifact_id == f"{done.id}-2"
    assert task_of(item(S.IN_PROGRESS, artifacts=handed)).artifacts == []  # only once it is done

    assert reply_of(done) is None  # not a direct reply: the task answers
    direct = reply_of(done.model_copy(update={"direct_reply": True}))
    assert direct is not None and direct.role == Role.ROLE_AGENT and not direct.task_id
    assert [p.text or p.filename or p.url for p in direct.parts] == [
        "fixed",
        "41 passed",
        "junit.xml",
        "https://ci.example.org/7/app.tar.gz",
    ]
    assert reply_of(item(S.IN_PROGRESS, direct_reply=True)) is None

    translator = StreamTranslator()
    translator.start(item(S.IN_PROGRESS, id=done.id, updated_at=done.updated_at - timedelta(seconds=1)))
    events = translator.update(done, "completed")
    sent = [e.artifact.name for e in events if isinstance(e, TaskArtifactUpdateEvent)]
    assert sent == ["result", "report", "build"] and events[-1].status.state == T.TASK_STATE_COMPLETED


def test_the_translator_sends_changes_once_and_skips_states_older_than_the_last() -> None:
    start = item(S.QUEUED)
    translator = StreamTranslator()
    assert translator.start(start).status.state == T.TASK_STATE_SUBMITTED
    assert translator.update(start.model_copy(update={"updated_at": start.updated_at}), "queued") == []
    later = start.updated_at + timedelta(seconds=1)
    claimed = start.model_copy(update={"status": S.CLAIMED, "updated_at": later})
    assert [e.status.state for e in translator.update(claimed, "claimed")] == [T.TASK_STATE_WORKING]
    older = start.model_copy(update={"status": S.QUEUED, "updated_at": start.updated_at})
    assert translator.update(older, "queued") == []
    progressed = claimed.model_copy(
        update={
            "status": S.IN_PROGRESS,
            "progress": Progress(percent=50, note="half"),
            "updated_at": later + timedelta(1),
        }
    )
    [update] = translator.update(progressed, "progress")
    assert update.status.message.parts[0].text == "50%: half"
    assert not translator.finished
    done = progressed.model_copy(
        update={"status": S.COMPLETED, "result": "ok", "updated_at": later + timedelta(2)}
    )
    artifact, status = translator.update(done, "completed")
    assert artifact.artifact.parts[0].text == "ok" and status.status.state == T.TASK_STATE_COMPLETED
    assert translator.finished


def request(*parts: Part, **metadata: Any) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id="m-1", parts=list(parts), metadata=metadata)
    return SendMessageRequest(message=message)


def test_a_message_becomes_a_submission() -> None:
    data = Part(
        data=struct_pb2.Value(
            struct_value=struct_pb2.Struct(fields={"k": struct_pb2.Value(string_value="v")})
        )
    )
    submission = submission_of(
        request(Part(text="first"), data, Part(text="second"), capability="code", priority=7, colour="blue"),
        context_id="ctx",
        default_capability=None,
    )
    assert (submission.description, submission.capability, submission.priority) == (
        "first\nsecond",
        "code",
        7,
    )
    assert submission.task_id == "m-1"
    assert submission.context == {"a2a": {"message_id": "m-1", "context_id": "ctx"}, "data": [{"k": "v"}]}


@pytest.mark.parametrize(
    ("parts", "metadata", "field"),
    [
        ((Part(text="x"),), {}, "metadata.capability"),
        ((Part(url="https://example.org/f"),), {"capability": "code"}, "message.parts.0"),
        ((Part(text="  "),), {"capability": "code"}, "message.parts"),
        ((Part(text="x"),), {"capability": "code", "priority": 11}, "metadata.priority"),
        ((Part(text="x"),), {"capability": "code", "context": "no"}, "metadata.context"),
        ((Part(text="x"),), {"capability": "Bad Cap"}, "metadata.capability"),
    ],
)
def test_a_message_that_cannot_be_work_names_the_field(
    parts: tuple[Part, ...], metadata: dict[str, Any], field: str
) -> None:
    with pytest.raises(A2AInvalid) as refused:
        submission_of(request(*parts, **metadata), context_id="c", default_capability=None)
    assert refused.value.field == field
    assert "Bad Cap" not in refused.value.message


def test_deadlines_pass_through_and_the_default_capability_fills_in() -> None:
    deadline = (utcnow() + timedelta(hours=1)).isoformat()
    submission = submission_of(
        request(Part(text="x"), deadline=deadline), context_id="c", default_capability="review"
    )
    assert submission.capability == "review" and submission.deadline is not None


def test_refusals_become_the_a2a_error_of_their_kind_with_the_a2a_field_name() -> None:
    from a2a.utils.errors import InvalidRequestError, TaskNotCancelableError, TaskNotFoundError

    from shared.errors import Forbidden
    from shared.work.rules import WorkConflict, WorkNotFound
    from weft.a2a.errors import INTERNAL_MESSAGE, translate
    from weft.a2a.handler import Access, Served

    missing = translate(WorkNotFound("0" * 32))
    assert isinstance(missing, TaskNotFoundError)
    assert missing.message == "id: no work item with this id in this project"
    assert missing.data == {
        "errors": [{"field": "id", "message": "id: no work item with this id in this project"}]
    }
    conflict = translate(WorkConflict("work_id: finished", field="work_id"), conflict=TaskNotCancelableError)
    assert isinstance(conflict, TaskNotCancelableError) and conflict.message == "id: finished"
    reader = Served(
        project=cast(Any, None),
        weft=cast(Any, None),
        disconnected=cast(Any, None),
        granted=frozenset({Access.READ}),
    )
    reader.allow(Access.READ)
    with pytest.raises(Forbidden) as refused:
        reader.allow(Access.OPERATE)
    assert isinstance(translate(refused.value), InvalidRequestError)
    assert translate(RuntimeError("sk-LIVE-secret")).message == INTERNAL_MESSAGE
