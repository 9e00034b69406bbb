"""Review rounds (shared.work) against a real nats-server: the review task is offered to
reviewers but never to the author, verdicts, rejections back to the workers with the
feedback, the last round into the DLQ, a silent reviewer redelivered, and dependents."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NatsClient

from shared.models import WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.events import work_actions
from testsupport.work import work_queue

S = WorkStatus
ALICE = "a" * 32  # writes code and reviews
BOB = "b" * 32  # writes code and reviews
CAROL = "c" * 32  # only reviews


def agent(agent_id: str, *caps: str) -> Claimant:
    return Claimant(agent_id=agent_id, agent_type="generic", capabilities=caps or ("code", "review"))


def reviewed(task: str = "t1", rounds: int = 2, **kw: object) -> WorkSubmission:
    data: dict[str, object] = {
        "task_id": task,
        "description": f"do {task}",
        "capability": "code",
        "review": {"capability": "review", "rounds": rounds},
    }
    data.update(kw)
    return WorkSubmission.model_validate(data)


async def test_a_review_goes_to_another_agent_and_approval_completes(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(reviewed())
    claimed = await q.claim(agent(ALICE))
    assert claimed is not None and claimed.id == item.id
    handed = await q.complete(item.id, ALICE, {"pr": 7})
    assert (handed.status, handed.review_round, handed.assigned_to) == (S.IN_REVIEW, 1, None)
    assert await q.queue_depths() == {"review": 1}

    assert await q.claim(agent(ALICE)) is None  # never the author: the subject leaves it out
    review = await q.claim(agent(BOB))
    assert review is not None and (review.status, review.assigned_to, review.result) == (
        S.REVIEWING,
        BOB,
        {"pr": 7},
    )
    done = await q.review(item.id, BOB, "approve", "looks right", score=4.5)
    assert (done.status, done.assigned_to, done.result) == (S.COMPLETED, ALICE, {"pr": 7})
    assert [(r.author, r.reviewer, r.verdict, r.score) for r in done.reviews] == [
        (ALICE, BOB, "approve", 4.5)
    ]
    assert await q.queue_depths() == {}
    assert await work_actions(nc, names, item.id) == [
        "submitted",
        "queued",
        "claimed",
        "in-review",
        "review-claimed",
        "approved",
        "completed",
    ]


async def test_a_rejection_goes_back_with_feedback_and_the_last_one_dead_letters(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(reviewed(rounds=2))
    for round_, (worker, reviewer) in enumerate(((ALICE, BOB), (BOB, ALICE)), 1):
        claimed = await q.claim(agent(worker, "code"))
        assert claimed is not None and claimed.id == item.id and claimed.attempts == round_
        if round_ == 2:  # the next worker sees the earlier round's result and feedback
            assert [(r.result, r.feedback) for r in claimed.reviews] == [({"try": 1}, "needs tests")]
        await q.complete(item.id, worker, {"try": round_})
        assert (await q.claim(agent(reviewer))) is not None
        verdict = await q.review(
            item.id, reviewer, "reject", "needs tests" if round_ == 1 else "still no tests"
        )
        assert verdict.status is (S.QUEUED if round_ == 1 else S.DEAD_LETTERED)
    dead = (await q.dlq_list()).items
    assert [d.item.id for d in dead] == [item.id]
    final = dead[0].item
    assert [r.feedback for r in final.reviews] == ["needs tests", "still no tests"]
    assert final.error == "rejected in review round 2 of 2: still no tests"

    retried = await q.dlq_retry(item.id)
    assert (retried.status, retried.review_round, len(retried.reviews)) == (S.QUEUED, 0, 2)


async def test_a_silent_reviewer_is_redelivered_and_nothing_is_lost(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id), ack_wait_s=1.0)
    item = await q.submit(reviewed())
    assert (await q.claim(agent(ALICE, "code"))) is not None
    await q.complete(item.id, ALICE, "work")
    gone = await q.claim(agent(BOB, "review"))
    assert gone is not None and gone.assigned_to == BOB  # ... and BOB goes silent
    await asyncio.sleep(1.3)
    taken = None
    for _ in range(40):
        taken = await q.claim(agent(CAROL, "review"))
        if taken is not None:
            break
        await asyncio.sleep(0.1)
    assert taken is not None and (taken.id, taken.status, taken.assigned_to) == (item.id, S.REVIEWING, CAROL)
    assert taken.result == "work" and taken.review_round == 1 and taken.errors == []
    done = await q.review(item.id, CAROL, "approve")
    assert done.status is S.COMPLETED
    refused = None
    try:
        await q.review(item.id, BOB, "approve")
    except Exception as exc:
        refused = exc
    assert refused is not None and "cannot review" in str(refused)


async def test_a_dependent_waits_until_the_review_approves(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    first = await q.submit(reviewed(rounds=1))
    after = await q.submit(
        WorkSubmission(task_id="after", description="d", capability="code", depends_on=[first.id])
    )
    assert (await q.claim(agent(ALICE, "code"))) is not None
    await q.complete(first.id, ALICE)
    assert (await q.get(after.id)).status is S.BLOCKED  # handed in is not completed
    assert (await q.claim(agent(BOB, "review"))) is not None
    await q.review(first.id, BOB, "approve")
    assert (await q.get(after.id)).status is S.QUEUED


async def test_a_last_round_rejection_fails_the_dependents_too(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    first = await q.submit(reviewed(rounds=1))
    after = await q.submit(
        WorkSubmission(task_id="after", description="d", capability="code", depends_on=[first.id])
    )
    await q.claim(agent(ALICE, "code"))
    await q.complete(first.id, ALICE)
    await q.claim(agent(BOB, "review"))
    await q.review(first.id, BOB, "reject", "wrong approach")
    failed = await q.get(after.id)
    assert failed.status is S.DEAD_LETTERED and failed.failed_dependency == first.id


async def test_a_conditional_pass_completes_and_creates_linked_follow_ups(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(reviewed(priority=7))
    assert (await q.claim(agent(ALICE))) is not None
    await q.complete(item.id, ALICE, {"pr": 9})
    assert (await q.claim(agent(BOB))) is not None
    done = await q.review(
        item.id,
        BOB,
        "conditional",
        "works; two gaps",
        score=80,
        follow_ups=["add docs", "cover the edge case"],
    )
    assert done.status is S.COMPLETED and done.reviews[-1].verdict == "conditional"
    made = done.reviews[-1].follow_ups
    assert len(made) == 2
    follow = [await q.get(work_id) for work_id in made]
    assert [f.description for f in follow] == ["add docs", "cover the edge case"]
    assert all(f.follow_up_of == item.id and f.status is S.QUEUED for f in follow)
    assert all(f.submitted_by == BOB and f.priority == 7 and f.review == item.review for f in follow)
    assert await q.queue_depths() == {"code": 2}  # new work, for the workers
    actions = await work_actions(nc, names, item.id)
    assert actions[-2:] == ["approved", "completed"]


async def test_a_refused_conditional_pass_creates_nothing(nc: NatsClient, project_id: str) -> None:
    from shared.work.rules import WorkError

    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(reviewed())
    assert (await q.claim(agent(ALICE))) is not None
    await q.complete(item.id, ALICE, {"pr": 1})
    try:
        await q.review(item.id, CAROL, "conditional", "", follow_ups=["x"])  # CAROL does not hold it
    except WorkError:
        pass
    else:
        raise AssertionError("a reviewer not holding the item passed it")
    assert (await q.get(item.id)).status is S.IN_REVIEW
    assert await q.queue_depths() == {"review": 1}  # no follow-up was made
