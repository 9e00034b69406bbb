"""WorkQueue when a rule finds the item moved on, against a real nats-server.

``fail`` (and a redelivered claim with no attempts left) publishes the dead letter,
then buries the record. If an operator's retry or the sweeper's expiry won the race
in between, the rule ``bury`` leaves the record alone: the dead letter just published
must go again, and nothing may announce a dead-lettering that did not happen.
"""

from __future__ import annotations

from nats.aio.client import Client as NatsClient

from shared.models import WorkStatus, WorkSubmission
from shared.names import ProjectNames
from testsupport.work import work_queue


async def test_a_dead_letter_is_removed_when_the_item_moved_on(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    queue = work_queue(nc, names)
    item = await queue.submit(WorkSubmission(task_id="t1", description="do it", capability="code"))
    # A queued record is what the burial finds after a retry requeued the failed item.
    after = await queue._dead_letter(item.id)
    assert after.status is WorkStatus.QUEUED
    record = await queue.get_record(item.id)
    assert (record.item.status, record.dlq_seq, record.dlq_at) == (WorkStatus.QUEUED, None, None)
    assert (await queue.dlq_list()).items == []
    js = nc.jetstream()
    dlq = await js.stream_info(names.dlq_stream)
    assert (dlq.state.messages, dlq.state.last_seq) == (0, 1)  # published, then removed
    await queue.settle()
    events = await js.stream_info(names.events_stream, subjects_filter=names.events_subjects)
    actions = {subject.rsplit(".", 1)[1] for subject in events.state.subjects or {}}
    assert actions == {"submitted", "queued"}
