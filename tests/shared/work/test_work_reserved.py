"""Work a landing sent back, against a real nats-server: the queue offers it to its author
alone (another agent's claim finds nothing), and once its reservation is lifted (Weft does
so when the author is offline) to every eligible agent, the reserved message dropped."""

from __future__ import annotations

from nats.aio.client import Client as NatsClient

from shared.models import LandingAttempt, WorkStatus, Workstream, WorkSubmission
from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.work import work_queue

AUTHOR = "a" * 32
OTHER = "b" * 32
LANDER = "d" * 32


def agent(agent_id: str, *caps: str) -> Claimant:
    return Claimant(agent_id=agent_id, agent_type="generic", capabilities=caps or ("code",))


async def test_sent_back_work_waits_for_its_author_until_it_is_unreserved(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    assert (await q.claim(agent(AUTHOR))) is not None
    ws = Workstream(branch="loom/t", base_ref="main", base_sha="1" * 40, head_sha="2" * 40, commits=1)
    await q.record_workstream(item.id, AUTHOR, ws, step="handed-in")
    assert (await q.complete(item.id, AUTHOR)).status is WorkStatus.LANDING
    assert (await q.claim(agent(LANDER, "land"))) is not None
    conflict = LandingAttempt(lander=LANDER, outcome="conflict", files=["a.py"])
    back = await q.settle_landing(item.id, LANDER, conflict, max_failures=3)
    assert (back.status, back.reserved_for) == (WorkStatus.QUEUED, AUTHOR)

    assert await q.claim(agent(OTHER)) is None  # not the author's: nothing for it
    freed = await q.unreserve(item.id, "its author is offline")
    assert freed is not None and freed.reserved_for is None
    assert await q.unreserve(item.id, "again") is None  # no longer reserved: nothing to do
    assert await q.queue_depths() == {"code": 1}  # the reserved message was dropped
    taken = await q.claim(agent(OTHER))
    assert taken is not None and taken.id == item.id and taken.assigned_to == OTHER
    assert await q.claim(agent(AUTHOR)) is None


async def test_the_author_claims_its_sent_back_work_first(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    await q.claim(agent(AUTHOR))
    ws = Workstream(branch="loom/t", base_ref="main", base_sha="1" * 40, head_sha="2" * 40, commits=1)
    await q.record_workstream(item.id, AUTHOR, ws, step="handed-in")
    await q.complete(item.id, AUTHOR)
    await q.claim(agent(LANDER, "land"))
    failed = LandingAttempt(lander=LANDER, outcome="gate-failed", detail="boom")
    await q.settle_landing(item.id, LANDER, failed, max_failures=3)
    assert await q.claim(agent(OTHER)) is None
    mine = await q.claim(agent(AUTHOR))
    assert mine is not None and (mine.assigned_to, mine.reserved_for, mine.attempts) == (AUTHOR, None, 2)
