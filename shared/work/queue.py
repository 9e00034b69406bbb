"""The work lifecycle on JetStream (docs/architecture.md, Work): submit, claim, progress,
complete, fail, cancel, expire, retry, dead-letter.

Both Warp (agents) and Weft (coordinator) drive work through this module, so
an item submitted over REST and one broadcast by an agent are the same thing
in the same queue.

Layout (names from :class:`shared.names.ProjectNames`):

* the **record** of each item lives in the project's work KV bucket (key = work
  id) and is the source of truth; every change is compare-and-set;
* the **queue** is a work-queue stream with one subject per (capability,
  boundary, required agent type, priority) and one shared durable pull
  consumer per subject, so competing agents each get a message exactly once;
* a **claim** holds the JetStream message unacknowledged; its ack subject is
  stored in the record, so any process can later complete (``+ACK``), report
  progress (``+WPI``, extends the ack deadline), retry (``-NAK``) or terminate
  (``+TERM``) it. A claim that goes silent past the ack deadline is redelivered
  by JetStream and counted as a failed attempt;
* after ``max_attempts`` the item moves to the dead-letter stream, addressed by
  the sequence stored in its record (no scanning);
* what each operation does to a record is a pure **rule** (:mod:`shared.work.rules`),
  checked against ``shared.models.WORK_LIFECYCLE``; :class:`WorkQueue` does the
  I/O: compare-and-set of the rule's record, then the acks, events and clean-up
  its :class:`Change` names.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from nats.aio.msg import Msg
from opentelemetry.trace import SpanKind

from shared.artifacts import WorkArtifact, check_size
from shared.models import (
    ControlRequest,
    Escalation,
    LandingAttempt,
    WorkItem,
    WorkStatus,
    Workstream,
    WorkSubmission,
    new_id,
    utcnow,
)
from shared.nats.jetstream import delete_unchanged, get_or_none, update_unchanged
from shared.tasks import together
from shared.trace.tracing import timed, traceparent_of, with_trace_headers
from shared.usage.rules import Budget, Usage
from shared.work.delivery import WorkDelivery
from shared.work.escalation import decide, escalate, needs_carrying_out, parse_decision
from shared.work.graph import DEAD_ENDS, PlanStep, check_dependencies, dead_end, plan_order
from shared.work.landing import (
    await_approval,
    await_forge,
    bounce,
    forge_settled,
    land,
    note_pending,
    release_landing,
)
from shared.work.lifecycle import WorkMove, move_allowed
from shared.work.rules import (
    CLAIM_LINGER_S,
    DEPENDENTS_AT_ONCE,
    Ack,
    BudgetReached,
    Change,
    Claimant,
    Delivery,
    Then,
    WorkEvent,
    WorkNotFound,
    WorkRecord,
    abandon,
    admit,
    bury,
    charge,
    check_error,
    check_percent,
    check_verdict,
    choose_checkpoint,
    claim_holds_message,
    discard,
    expire,
    finish,
    follow_up,
    hand_back,
    is_due,
    judge,
    keep_alive_subject,
    lapse_lost,
    link,
    message_must_be_held,
    needs_message,
    note_waiting,
    note_workstream,
    prioritize,
    rebudget,
    reconcile,
    record_failure,
    report,
    requeue,
    reset,
    resume,
    revive,
    satisfy,
    stop,
    store_seq,
    take,
    unreserve,
    wait_on,
)

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

log = logging.getLogger("loom.work")

Op = Callable[Concatenate["WorkQueue", str, P], Coroutine[Any, Any, R]]


def _traced(name: str) -> Callable[[Op[P, R]], Op[P, R]]:
    """Time an operation on one item as a span of the item's trace (``shared.trace.tracing.timed``)."""

    def wrap(op: Op[P, R]) -> Op[P, R]:
        @functools.wraps(op)
        async def run(self: WorkQueue, work_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with timed(self.traces, name, work_id=work_id) as outcome:
                result = await op(self, work_id, *args, **kwargs)
                outcome.about(result)
            return result

        return run

    return wrap


class WorkQueue(WorkDelivery):
    """All work operations for one project."""

    # -- submit -----------------------------------------------------------------
    async def submit(
        self,
        submission: WorkSubmission,
        *,
        submitted_by: str | None = None,
        work_id: str | None = None,
        follow_up_of: str | None = None,
    ) -> WorkItem:
        """One item: queued, or blocked until what it ``depends_on`` has completed.
        ``work_id``: its id, chosen by the caller (to listen for its events first);
        ``follow_up_of``: the item whose conditional pass creates it."""
        if submission.depends_on:
            (item,) = await self.submit_plan(
                [PlanStep(submission)], submitted_by=submitted_by, prefix=None, work_ids=[work_id]
            )
            return item
        await self.ensure()
        record = admit(
            submission,
            project_id=self.names.project_id,
            submitted_by=submitted_by,
            now=utcnow(),
            work_id=work_id,
            follow_up_of=follow_up_of,
        )
        return (await self._create(record)).item

    async def submit_plan(
        self,
        steps: Sequence[PlanStep],
        *,
        submitted_by: str | None = None,
        prefix: str | None = "items",
        work_ids: Sequence[str | None] | None = None,
    ) -> list[WorkItem]:
        """Several items that may wait for each other (``PlanStep.after``) and for existing
        items (``depends_on``); the items as they stand once submitted, in the steps' order.

        The whole plan is checked before anything is created (``shared.work.graph``: no
        cycle, every dependency exists in this project and may still complete). Ids are
        chosen first, so each item is created knowing which items of the plan wait for it;
        items are created in dependency order, and a blocked item is settled against its
        dependencies only once it exists (see "dependencies" above the rules)."""
        await self.ensure()
        order = plan_order(steps) if prefix is not None else [0]
        external = list(dict.fromkeys(d for step in steps for d in step.submission.depends_on))
        found = await self._items(external)
        check_dependencies(steps, found, prefix)
        now = utcnow()
        ids = [wanted or new_id() for wanted in (work_ids or [None] * len(steps))]
        dependents: list[list[str]] = [[] for _ in steps]
        for index, step in enumerate(steps):
            for before in step.after:
                dependents[before].append(ids[index])
        records = []
        for index, step in enumerate(steps):
            submission = step.submission
            if step.after:
                within = [ids[b] for b in step.after]
                submission = submission.model_copy(update={"depends_on": [*submission.depends_on, *within]})
            records.append(
                admit(
                    submission,
                    project_id=self.names.project_id,
                    submitted_by=submitted_by,
                    now=now,
                    work_id=ids[index],
                    dependents=dependents[index],
                )
            )
        stored = await self._each([records[i] for i in order], self._create)
        items = {r.item.id: r.item for r in stored}
        blocked = [r.item for r in stored if r.item.status is WorkStatus.BLOCKED]
        if blocked:
            items.update(await self._settle_new(blocked, set(external)))
        return [items[i] for i in ids]

    async def _settle_new(self, blocked: list[WorkItem], external: set[str]) -> dict[str, WorkItem]:
        """Link new blocked items to the existing items they depend on, then settle each
        against its dependencies as they are now: a dependency that finished before the
        link (or before a dependent of the same plan was created) told nobody."""
        waiting: dict[str, list[str]] = {}
        for item in blocked:
            for dependency_id in item.depends_on:
                if dependency_id in external:
                    waiting.setdefault(dependency_id, []).append(item.id)

        async def link_all(dependency_id: str) -> tuple[str, WorkItem | None]:
            try:
                before, change = await self._mutate(dependency_id, lambda r: link(r, waiting[dependency_id]))
            except WorkNotFound:
                return dependency_id, None
            return dependency_id, (change.record or before).item

        linked = dict(await self._each(list(waiting), link_all))
        internal = {d for item in blocked for d in item.depends_on if d not in external}
        now_found = {**linked, **await self._items(internal)}
        settled: dict[str, WorkItem] = {}

        async def settle(item: WorkItem) -> None:
            record = WorkRecord(item=item)
            if reconcile(record, now_found, utcnow()).record is None:
                return  # nothing finished yet: whatever finishes will find this item among its dependents
            after = await self._apply(item.id, lambda r: reconcile(r, now_found, utcnow()))
            if after is not None:
                settled[item.id] = after

        await self._each(blocked, settle)
        return settled

    async def _create(self, record: WorkRecord) -> WorkRecord:
        """Store a new record and announce it; a queued one gets its queue message too. The
        record as stored: with the trace context its submission started (``traceparent``)."""
        attributes: dict[str, str | int | float | bool] = {
            "loom.work.capability": record.item.capability,
            "loom.work.priority": record.item.priority,
        }
        with self.traces.span(
            "work.submit", work_id=record.item.id, kind=SpanKind.PRODUCER, attributes=attributes
        ):
            if record.item.traceparent is None:
                record = WorkRecord(item=record.item.model_copy(update={"traceparent": traceparent_of()}))
            await self._store_new(record)
        return record

    async def _store_new(self, record: WorkRecord) -> None:
        item = record.item
        kv = await self.records_bucket()
        if item.status is WorkStatus.BLOCKED:
            await kv.create(item.id, record.to_json_bytes())
            await asyncio.gather(self._publish_event("submitted", item), self._publish_event("blocked", item))
            return
        subject = self._subject_of(item)
        await self._ensure_consumer(subject)
        revision = await kv.create(item.id, record.to_json_bytes())
        # The two events, then the queue message, pipelined on one connection: one round
        # trip, and the server receives them in that order, so a claim (and its event) can
        # only come after them. The queue message decides the outcome.
        _, _, published = await asyncio.gather(  # a new item: no earlier event to wait for
            self._publish_event("submitted", item),
            self._publish_event("queued", item),
            self._js.publish(
                subject,
                json.dumps({"work_id": item.id, "epoch": 1}).encode(),
                headers=with_trace_headers({"Nats-Msg-Id": f"{item.id}.1"}, item.traceparent),
            ),
            return_exceptions=True,
        )
        if isinstance(published, BaseException):
            # Not queued: take the record back (unless something changed it), so the error
            # the caller sees means "nothing was submitted" and no record waits forever.
            with contextlib.suppress(Exception):
                await delete_unchanged(kv, item.id, revision)
            raise published
        seq, now = int(published.seq), utcnow()
        queued = store_seq(record, seq, 1, now).record
        assert queued is not None
        if await update_unchanged(kv, item.id, queued.to_json_bytes(), revision) is None:
            # claimed (or cancelled) already: record the seq onto that
            await self._mutate(item.id, lambda r: store_seq(r, seq, 1, now))

    # -- dependencies ------------------------------------------------------------
    async def _items(self, work_ids: Iterable[str]) -> dict[str, WorkItem | None]:
        """The current item of each id (None where there is none), read concurrently."""
        wanted = list(dict.fromkeys(work_ids))

        async def one(work_id: str) -> tuple[str, WorkItem | None]:
            entry = await get_or_none(await self.records_bucket(), work_id)
            if entry is None or entry.value is None:
                return work_id, None
            return work_id, WorkRecord.model_validate_json(entry.value).item

        return dict(await self._each(wanted, one))

    @staticmethod
    async def _each(values: Sequence[T], op: Callable[[T], Awaitable[R]]) -> list[R]:
        """``op`` over ``values``, at most :data:`DEPENDENTS_AT_ONCE` at a time, results in order."""
        results: list[R] = []
        for start in range(0, len(values), DEPENDENTS_AT_ONCE):
            chunk = values[start : start + DEPENDENTS_AT_ONCE]
            results.extend(await asyncio.gather(*(op(v) for v in chunk)))
        return results

    async def _apply(
        self, work_id: str, rule: Callable[[WorkRecord], Change], *, guarded: bool = False
    ) -> WorkItem | None:
        """Run a rule on one item that may be gone or may not need it (a dependency rule, an
        answer, a pull request's outcome) and carry out what it decided: its events, a queue
        message, the DLQ when it failed for good (and then its own dependents; ``guarded``
        as for :meth:`_carry_out`). The item as it now stands, or None when it is gone or
        unchanged."""
        try:
            _, change, revision = await self._mutate_at(work_id, rule)
        except WorkNotFound:
            return None  # not created yet (its own settling will see this change) or deleted
        if change.record is None:
            return None
        return await self._carry_out(work_id, change, revision, guarded=guarded)

    async def _carry_out(
        self, work_id: str, change: Change, revision: int, *, guarded: bool = True
    ) -> WorkItem:
        """What a stored change (at ``revision``) asks for next: its ack, its dead letter and
        superseded queue message dropped, then a queue message with its events, or its events, the DLQ and the
        dependents told. ``guarded``: the operation is on record, so telling the dependents
        may fail without failing it (see :meth:`_tell_dependents`)."""
        assert change.record is not None
        item = change.record.item
        await self._ack(change.ack_subject, change.ack)
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        if change.drop_queue_seq is not None:
            await self._delete_queued(change.drop_queue_seq)
        if change.then is Then.ENQUEUE:
            await self._queue_now(change.record, revision, change.events)
            return item
        await self._announce(change.events, item)
        if change.then is Then.DEAD_LETTER:
            item = await self._dead_letter(work_id)
        await (self._tell_dependents(item) if guarded else self._cascade(item))
        return item

    async def _queue_now(self, record: WorkRecord, revision: int, events: Iterable[WorkEvent]) -> None:
        """An item just became queued (stored at ``revision``): its events and its queue
        message pipelined in one round trip, as on submit, then the message's seq on the
        record, without reading it again unless someone changed it meanwhile (the claim)."""
        item = record.item
        subject = self._subject_of(item)
        await self._ensure_consumer(subject)
        await self.settle()
        epoch = record.enqueues + 1
        announced = asyncio.gather(*(self._publish_event(e.action, item, **e.data) for e in events))
        published = self._js.publish(
            subject,
            json.dumps({"work_id": item.id, "epoch": epoch}).encode(),
            headers=with_trace_headers({"Nats-Msg-Id": f"{item.id}.{epoch}"}, item.traceparent),
        )
        _, ack = await asyncio.gather(announced, published)
        seq, now = int(ack.seq), utcnow()
        stamped = store_seq(record, seq, epoch, now).record
        assert stamped is not None
        kv = await self.records_bucket()
        if await update_unchanged(kv, item.id, stamped.to_json_bytes(), revision) is None:
            await self._mutate(item.id, lambda r: store_seq(r, seq, epoch, now))

    async def _tell_dependents(self, item: WorkItem) -> None:
        """:meth:`_cascade` after an operation that is already on record: a failure here is
        logged, never reported as the operation's (the caller would complete or cancel
        again what it did); a sweep repairs the dependents (``weft/project/repair.py``)."""
        if not item.dependents:
            return
        try:
            await self._cascade(item)
        except Exception as exc:
            log.warning("work %s is %s, but its dependents were not all told: %s", item.id, item.status, exc)

    async def _cascade(self, item: WorkItem) -> None:
        """Tell the dependents of an item that completed (one less to wait for) or can no
        longer complete (they fail for good, naming it, and so on down the chain). A loop
        over a work list rather than recursion: a chain may be a thousand items long."""
        pending = deque([item])
        while pending:
            source = pending.popleft()
            if not source.dependents:
                continue
            if source.status is WorkStatus.COMPLETED:
                await self._each(source.dependents, functools.partial(self._satisfy, source.id))
                continue
            why = dead_end(source)
            if why is not None:
                dead = await self._each(source.dependents, functools.partial(self._abandon, source.id, why))
                pending.extend(d for d in dead if d is not None)

    async def _satisfy(self, done: str, work_id: str) -> WorkItem | None:
        return await self._apply(work_id, lambda r: satisfy(r, done, utcnow()))

    async def _abandon(self, failed: str, why: str, work_id: str) -> WorkItem | None:
        """``abandon`` one dependent; the dead letter it became (its own dependents are the
        caller's next step), or None."""
        try:
            _, change = await self._mutate(work_id, lambda r: abandon(r, failed, why, utcnow()))
        except WorkNotFound:
            return None
        if change.record is None:
            return None
        await self._announce(change.events, change.record.item)
        if change.then is not Then.DEAD_LETTER:
            return None
        dead = await self._dead_letter(work_id)
        return dead if dead.status is WorkStatus.DEAD_LETTERED else None

    async def _revive(self, retried: str, work_id: str) -> WorkItem | None:
        return await self._apply(work_id, lambda r: revive(r, retried, utcnow()))

    async def _revive_chain(self, item: WorkItem) -> None:
        """``item`` was retried: items that failed because of it wait for it again, and so
        on down the chain; each is then settled against its dependencies."""
        pending = deque([item])
        while pending:
            source = pending.popleft()
            revived = await self._each(source.dependents, functools.partial(self._revive, source.id))
            for back in revived:
                if back is None:
                    continue
                now = await self.settle_blocked(back.id) or back
                if now.status not in DEAD_ENDS:  # failed again: another dependency is gone
                    pending.append(now)

    async def settle_blocked(self, work_id: str) -> WorkItem | None:
        """Settle a blocked item against its dependencies as they are now (after a revival,
        and a sweep's repair when a process stopped before telling it); None: no change."""
        record = await self._record_or_none(work_id)
        if record is None or record.item.status is not WorkStatus.BLOCKED:
            return None
        found = await self._items(record.item.blocked_on)
        return await self._apply(work_id, lambda r: reconcile(r, found, utcnow()))

    async def revive_from(self, work_id: str, dependency_id: str) -> WorkItem | None:
        """A sweep's repair: ``work_id`` failed because of ``dependency_id``, which was retried
        since; revive it (and its chain) as the retry would have."""
        back = await self._apply(work_id, lambda r: revive(r, dependency_id, utcnow()))
        if back is None:
            return None
        await self.settle_blocked(work_id)
        await self._revive_chain(back)
        return back

    async def ensure_enqueued(self, work_id: str) -> bool:
        """A sweep's repair: publish the queue message of an item queued without one
        (see :func:`needs_message`), or whose message the stream no longer holds though
        no claim took the item (lost: nothing else would ever deliver it); and lapse the
        claim on a held item whose message is gone (:func:`lapse_lost`: nothing could keep
        that claim alive or deliver the item again). True when it did.

        Replicas repairing at once publish the enqueue number after the one they judged,
        which JetStream's duplicate window stores once; a lapse is a compare-and-set."""
        record = await self._record_or_none(work_id)
        if record is None:
            return False
        if needs_message(record):
            await self._enqueue(work_id, after=record)
            return True
        held = claim_holds_message(record)
        if not (held or message_must_be_held(record)) or await self._queued_message_held(record):
            return False
        if not held:
            log.warning("work %s: queued, but its queue message is gone; queueing it again", work_id)
            await self._enqueue(work_id, after=record)
            return True
        seq = record.queue_seq
        assert seq is not None  # a claim holds its stored message
        log.warning("work %s: held, but its queue message is gone; the claim lapses, queued again", work_id)
        return await self._apply(work_id, lambda r: lapse_lost(r, seq, utcnow())) is not None

    # -- claim -----------------------------------------------------------------
    async def claim(self, claimant: Claimant) -> WorkItem | None:
        """Take the highest-priority eligible item, or None when there is none.

        Refused (:class:`BudgetReached`) while the project's daily budget, or that of the
        claimant's target, is reached: the one place claims are admitted."""
        hold, subjects = await together(  # the hold decides; the subjects come with it
            self.ledger.hold(utcnow(), target_id=claimant.target_id), self.eligible_subjects(claimant)
        )
        if hold is not None:
            raise BudgetReached(hold)
        for subject in subjects:
            lingered = False
            while True:
                msg = await self._next(subject)
                if msg is None and not lingered and await self._undelivered(subject):
                    # A message stored a moment ago may not have reached the
                    # consumer yet; a no-wait pull then answers "none". Wait
                    # briefly for it rather than report an empty queue.
                    lingered = True
                    msg = await self._next(subject, linger_s=CLAIM_LINGER_S)
                if msg is None:
                    break
                item = await self._take(msg, claimant)
                if item is not None:
                    return item
        return None

    async def _take(self, msg: Msg, claimant: Claimant) -> WorkItem | None:
        """Turn a delivered message into a claim, or dispose of it; None if not taken."""
        try:
            work_id = str(json.loads(msg.data)["work_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("dropping malformed queue message on %s", msg.subject)
            await self._ack(msg.reply, Ack.STOP)
            return None
        meta = msg.metadata
        delivery = Delivery(
            ack_subject=msg.reply, stream_seq=int(meta.sequence.stream), delivered=int(meta.num_delivered)
        )
        now = utcnow()
        with timed(self.traces, "work.claim", work_id=work_id, kind=SpanKind.CONSUMER) as outcome:
            try:
                before, change = await self._mutate(
                    work_id, lambda r: take(r, claimant.agent_id, delivery, now)
                )
            except WorkNotFound:
                await self._ack(msg.reply, Ack.STOP)
                return None
            await self._ack(change.ack_subject, change.ack)
            if change.record is None:
                return None
            item = change.record.item
            outcome.about(item)
        if item.status in (WorkStatus.CLAIMED, WorkStatus.REVIEWING, WorkStatus.MERGING):
            self._trace_wait(before.item, item)
            *earlier, claimed = change.events
            await self._announce(earlier, item)
            self._event_soon(claimed.action, item, **claimed.data)  # the claim need not wait
            return item
        await self._announce(change.events, item)
        if change.then is Then.DEAD_LETTER:
            item = await self._dead_letter(work_id)
        await self._tell_dependents(item)  # expired or dead-lettered: its dependents will not run
        return None

    def _trace_wait(self, queued: WorkItem, claimed: WorkItem) -> None:
        """The time the item waited in its queue, as a span of its trace (from its last
        change before the claim: its queueing)."""
        self.traces.record(
            "work.queued",
            work_id=claimed.id,
            traceparent=claimed.traceparent,
            kind=SpanKind.INTERNAL,
            attributes={"loom.work.subject": self._subject_of(queued)},
            start_ns=int(queued.updated_at.timestamp() * 1e9),
            failure=None,
        )

    # -- holder operations ------------------------------------------------------
    @_traced("work.progress")
    async def progress(
        self,
        work_id: str,
        agent_id: str,
        percent: int,
        note: str = "",
        *,
        usage: Usage | None = None,
        target_id: str | None = None,
    ) -> WorkItem:
        """Progress, with the ``usage`` since the last report added (see rule ``charge``:
        over its budget, the item is stopped and this returns it dead-lettered)."""
        check_percent(percent)  # before any I/O, whatever the item
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id,
            lambda r: charge(
                r, agent_id, usage, target_id, now, lambda x: report(x, agent_id, percent, note, now)
            ),
        )
        assert change.record is not None
        await self._count(usage, target_id, now)
        if change.then is not None:
            return await self._carry_out(work_id, change, revision)
        await self._ack(change.ack_subject, change.ack)
        await self._announce(change.events, change.record.item)
        return change.record.item

    @_traced("work.complete")
    async def complete(
        self,
        work_id: str,
        agent_id: str,
        result: Any = None,
        *,
        usage: Usage | None = None,
        target_id: str | None = None,
        artifacts: Sequence[WorkArtifact] = (),
        reply: bool = False,
    ) -> WorkItem:
        """Completed; or, for work that asks for review, handed in (its review task queued);
        or, when ``usage`` takes it over its budget, stopped (rule ``charge``). ``artifacts``
        are kept with the result, within their share of the record (refused by name if not);
        ``reply``: the result is a direct answer to whoever asked."""
        kept = check_size(list(artifacts))
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id,
            lambda r: charge(
                r,
                agent_id,
                usage,
                target_id,
                now,
                lambda x: finish(x, agent_id, result, now, kept, reply=reply),
            ),
        )
        await self._count(usage, target_id, now)
        return await self._carry_out(work_id, change, revision)

    async def _count(self, usage: Usage | None, target_id: str | None, now: datetime) -> None:
        """Add a recorded report to the day's counters. The item's record already holds it,
        so a counter that cannot be written is logged, not reported as a failed operation."""
        if usage is None or usage.empty:
            return
        try:
            await self.ledger.add(usage, target_id=target_id, now=now)
        except Exception as exc:
            log.warning("usage recorded on the item but not counted for the day: %s", type(exc).__name__)

    @_traced("work.budget")
    async def set_budget(self, work_id: str, budget: Budget | None) -> WorkItem:
        """An operator's new budget for an unfinished item (rule ``rebudget``)."""
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: rebudget(r, budget, now))
        assert change.record is not None
        await self._announce(change.events, change.record.item)
        return change.record.item

    @_traced("work.review")
    async def review(
        self,
        work_id: str,
        agent_id: str,
        verdict: str,
        feedback: str = "",
        score: float | None = None,
        follow_ups: Sequence[str] = (),
    ) -> WorkItem:
        """The verdict of the reviewer holding the item (see rule ``judge``). A conditional
        pass then creates its follow-ups (rule ``follow_up``) under the ids the verdict
        recorded, so the reviewed item and its follow-ups name each other."""
        check_verdict(verdict, feedback, score, follow_ups)  # before any I/O, whatever the item
        ids = [new_id() for _ in follow_ups]
        now = utcnow()
        record, change, revision = await self._mutate_at(
            work_id, lambda r: judge(r, agent_id, verdict, feedback, score, now, ids)
        )
        item = await self._carry_out(work_id, change, revision)
        for n, (text, follow_up_id) in enumerate(zip(follow_ups, ids, strict=True), start=1):
            await self.submit(
                follow_up(record.item, text, n, feedback),
                submitted_by=agent_id,
                work_id=follow_up_id,
                follow_up_of=work_id,
            )
        return item

    @_traced("work.wait_on_operator")
    async def wait_on_operator(
        self, work_id: str, agent_id: str, question_id: str, *, question: str = ""
    ) -> WorkItem:
        """The holder waits on the operator's answer to ``question_id`` (rule ``wait_on``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id, lambda r: wait_on(r, agent_id, question_id, now, question)
        )
        return await self._carry_out(work_id, change, revision)

    @_traced("work.resume")
    async def resume(
        self, work_id: str, question_id: str, *, answered: bool, answer: str = "", by: str | None = None
    ) -> WorkItem | None:
        """The question was answered (by ``by``) or expired: the item waiting on it is in
        progress again, or its landing decided; None when it no longer waited on it."""
        now = utcnow()
        return await self._apply(
            work_id, lambda r: resume(r, question_id, answered, now, answer, by), guarded=True
        )

    async def keep_alive(self, work_id: str, agent_id: str) -> bool:
        """``+WPI`` on the claim of an item ``agent_id`` holds waiting on the operator, so it
        does not lapse; False when it is not waiting (nothing sent)."""
        record = await self._record_or_none(work_id)
        subject = keep_alive_subject(record, agent_id) if record is not None else None
        await self._ack(subject, Ack.WORKING)
        return subject is not None

    @_traced("work.workstream")
    async def record_workstream(
        self, work_id: str, agent_id: str, workstream: Workstream, *, step: str
    ) -> WorkItem:
        """The holder's record of its item's workstream (rule ``note_workstream``)."""
        now = utcnow()
        current, change = await self._mutate(
            work_id, lambda r: note_workstream(r, agent_id, workstream, step, now)
        )
        item = (change.record or current).item
        await self._announce(change.events, item)
        return item

    @_traced("work.restore")
    async def choose_checkpoint(self, work_id: str, sha: str) -> WorkItem:
        """The checkpoint the item's next attempt starts from (rule ``choose_checkpoint``)."""
        now = utcnow()
        current, change = await self._mutate(work_id, lambda r: choose_checkpoint(r, sha, now))
        item = (change.record or current).item
        await self._announce(change.events, item)
        return item

    # -- landing (docs/landing.md) -------------------------------------------------
    @_traced("work.land.pending")
    async def note_pending(self, work_id: str, agent_id: str, sha: str) -> WorkItem:
        """The lander is about to push ``sha``, which holds the item (rule ``note_pending``)."""
        now = utcnow()
        current, change = await self._mutate(work_id, lambda r: note_pending(r, agent_id, sha, now))
        return (change.record or current).item

    @_traced("work.land")
    async def settle_landing(
        self, work_id: str, agent_id: str, attempt: LandingAttempt, *, max_failures: int
    ) -> WorkItem:
        """Landed (rule ``land``: completed, its dependents told), or back to the workers with
        why, or after ``max_failures`` into the DLQ (rule ``bounce``)."""
        now = utcnow()
        if attempt.outcome == "landed":
            rule: Callable[[WorkRecord], Change] = lambda r: land(r, agent_id, attempt, now)  # noqa: E731
        else:
            rule = lambda r: bounce(r, agent_id, attempt, max_failures, now)  # noqa: E731
        _, change, revision = await self._mutate_at(work_id, rule)
        return await self._carry_out(work_id, change, revision)

    @_traced("work.land.pull_request")
    async def await_forge(self, work_id: str, agent_id: str, number: int, url: str) -> WorkItem:
        """Its pull request is open: it waits for GitHub (rule ``await_forge``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id, lambda r: await_forge(r, agent_id, number, url, now)
        )
        return await self._carry_out(work_id, change, revision)

    @_traced("work.land.ask")
    async def await_approval(self, work_id: str, agent_id: str, question_id: str) -> WorkItem:
        """The operator is asked "land this?": it waits for the answer (rule ``await_approval``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id, lambda r: await_approval(r, agent_id, question_id, now)
        )
        return await self._carry_out(work_id, change, revision)

    @_traced("work.land.forge")
    async def forge_settled(
        self, work_id: str, number: int, merged_sha: str | None, *, max_failures: int
    ) -> WorkItem | None:
        """GitHub merged (``merged_sha``) or closed the pull request the item waits on (rule
        ``forge_settled``); None when it no longer waited on it."""
        now = utcnow()
        return await self._apply(
            work_id, lambda r: forge_settled(r, number, merged_sha, max_failures, now), guarded=True
        )

    @_traced("work.land.release")
    async def release_landing(
        self, work_id: str, agent_id: str, why: str, *, deferred: bool = False
    ) -> WorkItem:
        """Given back to the landers' queue untouched (rule ``release_landing``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id, lambda r: release_landing(r, agent_id, why, now, deferred=deferred)
        )
        return await self._carry_out(work_id, change, revision)

    @_traced("work.fail")
    async def fail(self, work_id: str, agent_id: str, error: str, *, retryable: bool = True) -> WorkItem:
        """Record a failed attempt: back to the queue, or to the DLQ when attempts are used up."""
        check_error(error)  # before any I/O, whatever the item
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: record_failure(r, agent_id, error, retryable, now))
        assert change.record is not None
        await self._announce(change.events, change.record.item)
        if change.then is Then.DEAD_LETTER:
            await self._ack(change.ack_subject, change.ack)
            dead = await self._dead_letter(work_id)
            await self._tell_dependents(dead)
            return dead
        current, queued = await self._mutate(work_id, lambda r: requeue(r, utcnow()))
        await self._ack(change.ack_subject, change.ack)
        item = (queued.record or current).item
        await self._announce(queued.events, item)
        return item

    async def _dead_letter(self, work_id: str) -> WorkItem:
        """Publish the failed item to the DLQ, then bury its record (see rule ``bury``)."""
        record, _ = await self._load(work_id)
        item = record.item.model_copy(update={"status": WorkStatus.DEAD_LETTERED})
        ack = await self._js.publish(
            self.names.dlq_subject(item.capability),
            item.to_json_bytes(),
            headers={"Nats-Msg-Id": f"dlq.{item.id}.{record.enqueues}"},
        )
        now = utcnow()
        current, change = await self._mutate(work_id, lambda r: bury(r, int(ack.seq), now))
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        after = (change.record or current).item
        await self._announce(change.events, after)
        return after

    # -- operator operations ------------------------------------------------------
    @_traced("work.cancel")
    async def cancel(self, work_id: str, *, reason: str = "", by: str = "operator") -> WorkItem:
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: stop(r, reason, by, now))
        assert change.record is not None
        await self._ack(change.ack_subject, change.ack)
        if change.notify:
            request = ControlRequest(action="cancel-work", work_id=work_id, reason=reason, requested_by=by)
            await self._nc.publish(self.names.control_subject(change.notify), request.to_json_bytes())
        if change.drop_queue_seq is not None:
            await self._delete_queued(change.drop_queue_seq)
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        await self._announce(change.events, change.record.item)
        await self._tell_dependents(change.record.item)
        return change.record.item

    async def expire_due(self, now: datetime | None = None) -> list[WorkItem]:
        """Move waiting items whose deadline has passed to ``expired``."""
        moment = now or utcnow()
        expired: list[WorkItem] = []
        for record in await self.all_records():
            if not (move_allowed(WorkMove.EXPIRE, record.item.status) and is_due(record.item, moment)):
                continue
            _, change = await self._mutate(record.item.id, lambda r: expire(r, moment))
            if change.record is None:
                continue
            if change.drop_queue_seq is not None:
                await self._delete_queued(change.drop_queue_seq)
            await self._announce(change.events, change.record.item)
            await self._tell_dependents(change.record.item)
            expired.append(change.record.item)
        return expired

    @_traced("work.unreserve")
    async def unreserve(self, work_id: str, why: str) -> WorkItem | None:
        """Offer work reserved for a gone agent to everyone (rule ``unreserve``); the item
        as it now stands, or None when it no longer waited reserved (or is gone)."""
        now = utcnow()
        return await self._apply(work_id, lambda r: unreserve(r, why, now), guarded=True)

    @_traced("work.hand_back")
    async def hand_back(self, work_id: str, agent_id: str, why: str) -> WorkItem:
        """The holder gives its item back to the queue, not as a failed attempt (rule
        ``hand_back``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(work_id, lambda r: hand_back(r, agent_id, why, now))
        return await self._carry_out(work_id, change, revision)

    @_traced("work.prioritize")
    async def prioritize(self, work_id: str, priority: int, why: str) -> WorkItem | None:
        """Raise a waiting item's priority (rule ``prioritize``); the item as it now stands,
        or None when it was left alone (or is gone)."""
        now = utcnow()
        return await self._apply(work_id, lambda r: prioritize(r, priority, why, now), guarded=True)

    async def set_waiting_reason(self, work_id: str, reason: str | None) -> WorkItem | None:
        """Record why an item is still waiting (see :func:`note_waiting`); the updated item,
        or None when nothing changed (same reason, claimed meanwhile, or gone)."""
        now = utcnow()
        return await self._change_if_any(work_id, lambda r: note_waiting(r, reason, now))

    async def _change_if_any(self, work_id: str, rule: Callable[[WorkRecord], Change]) -> WorkItem | None:
        """A rule that may leave the item alone (or find it gone), with its events: the item
        as changed, or None."""
        try:
            _, change = await self._mutate(work_id, rule)
        except WorkNotFound:
            return None
        if change.record is None:
            return None
        await self._announce(change.events, change.record.item)
        return change.record.item

    @_traced("work.retry")
    async def retry(self, work_id: str) -> WorkItem:
        """Back to the queue with attempts reset, from ``failed`` or ``dead-lettered``; an
        item that failed because of a dependency waits for it again (``blocked``). Items
        that failed because of this one are revived with it."""
        record = await self.get_record(work_id)
        cause = record.item.failed_dependency
        found = await self._items([cause]) if cause is not None else {}
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: reset(r, now, found))
        if change.then is Then.ENQUEUE:
            await self._enqueue(work_id)
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        item = await self.get(work_id)
        await self._announce(change.events, item)
        if item.status is WorkStatus.BLOCKED:
            item = await self.settle_blocked(work_id) or item
        if item.status not in DEAD_ENDS and item.dependents:
            try:
                await self._revive_chain(item)
            except Exception as exc:  # the retry is on record; a sweep revives the rest
                log.warning("work %s was retried, but its dependents were not all revived: %s", item.id, exc)
        return item

    # -- escalation (shared/work/escalation.py) --------------------------------------
    async def escalate(self, work_id: str, escalation: Escalation) -> WorkItem | None:
        """Write the report and the question on the dead letter; None when another process
        did first (or the item is no longer that dead letter)."""
        now = utcnow()
        return await self._change_if_any(work_id, lambda r: escalate(r, escalation, now))

    async def decide_escalation(
        self, work_id: str, question_id: str, answer: str, by: str
    ) -> WorkItem | None:
        """The person's answer to an escalation, carried out; None when it was decided
        already or the item is no longer waiting for it."""
        resolution = parse_decision(answer)
        now = utcnow()
        decided = await self._change_if_any(work_id, lambda r: decide(r, question_id, resolution, by, now))
        if decided is None:
            return None
        if resolution.action == "skip":
            with contextlib.suppress(WorkNotFound):  # nothing left to discard
                return await self.dlq_discard(work_id)
            return decided
        return await self.carry_out_escalation(work_id, decided)

    async def carry_out_escalation(self, work_id: str, item: WorkItem | None = None) -> WorkItem | None:
        """A decided escalation's retry or cancel (``item``: as just decided; else read, a
        sweep's repair after a process stopped between deciding and doing it); None when
        there is nothing to do."""
        item = item or await self.get(work_id)
        if not needs_carrying_out(item):
            return None
        assert item.escalation is not None and item.escalation.decision is not None
        if item.escalation.decision == "cancel":
            by = item.escalation.decided_by or "operator"
            return await self.cancel(work_id, reason="escalation answered: cancel", by=by)
        return await self.retry(work_id)

    # -- dead-letter queue --------------------------------------------------------
    async def dlq_retry(self, work_id: str) -> WorkItem:
        await self.dlq_get(work_id)
        return await self.retry(work_id)

    async def dlq_discard(self, work_id: str) -> WorkItem:
        letter = await self.dlq_get(work_id)
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: discard(r, letter.dlq_seq, now))
        assert change.record is not None
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        await self._announce(change.events, change.record.item)
        return change.record.item
