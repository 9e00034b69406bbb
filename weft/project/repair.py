"""What a sweep repairs in one project's work: the steps a process did not get to because
it stopped between them (docs/architecture.md, Work: dependencies).

The normal path is done by whoever makes a change (Warp or Weft, ``shared/work/queue.py``); this
is the second line, judged from Weft's copy of the records and carried out by the same
idempotent, compare-and-set rules, so replicas repairing at once change an item once:

* a blocked item whose dependency completed or can no longer complete without telling
  it is settled;
* an item that failed because of a dependency that has since been retried is revived;
* a queued item (or one handed in for review) whose queue message was never stored
  gets one, and so does one whose message the stream no longer holds though no claim
  took it (lost, as a cluster's faults can: nothing else would deliver it again);
* a held item (claimed, under review or being merged) whose queue message the stream no
  longer holds has its claim lapsed and is queued again, as a redelivery would have done
  (a claim holds its message unacknowledged, so one gone means nothing can keep that claim
  alive or deliver the item again: a claim stored after its agent gave up on it, say);
* an item still waiting on the operator about a question that was answered or expired
  goes back in progress (a lander's "land this?": its landing is decided; a question
  that was never stored puts it back in the landers' queue). The copy does not show
  queue messages, so each queued or held item is read after it has been quiet for a
  while, and again while it stays unchanged, at intervals doubling up to
  :data:`RECHECK_MAX`; a read that failed is tried again at the next sweep.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable
from datetime import datetime, timedelta

from shared.models import WorkStatus, utcnow
from shared.tasks import raise_if_cancelling
from shared.work.graph import repairs
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from shared.work.rules import CLAIM_HOLDS_MESSAGE, WAITING_IN_A_QUEUE
from weft.project.work import WorkIndex

log = logging.getLogger("loom.weft.repair")

GRACE = timedelta(seconds=5)
"""Changes younger than this are left to the process still making them."""
REMEMBERED = 50_000
RECHECK_MAX = timedelta(minutes=10)
"""The longest an unchanged queued item goes before its queue message is checked again."""
ON_A_QUESTION = frozenset({WorkStatus.WAITING_ON_OPERATOR, WorkStatus.LANDING})
"""An agent's question (waiting-on-operator) or a lander's "land this?" (landing)."""
MESSAGE_CHECKED = WAITING_IN_A_QUEUE | CLAIM_HOLDS_MESSAGE
"""Waiting in a queue, or held through a queue message: whose message a sweep checks."""


class WorkRepair:
    def __init__(self, queue: WorkQueue, work: WorkIndex, questions: QuestionBook) -> None:
        self.queue = queue
        self.work = work
        self.questions = questions
        self._checked: OrderedDict[tuple[str, datetime], tuple[datetime, timedelta]] = OrderedDict()
        """(item, version) -> when to check its queue message again, and the interval used."""

    async def sweep(self, now: datetime | None = None) -> dict[str, int]:
        moment = now or utcnow()
        items = self.work.by_id()
        found = repairs(items, moment, grace=GRACE)
        done = {"settled": 0, "revived": 0, "enqueued": 0, "resumed": 0}
        for work_id in found.settle:
            if await self._try(self.queue.settle_blocked(work_id), work_id):
                done["settled"] += 1
        for work_id, dependency_id in found.revive:
            if await self._try(self.queue.revive_from(work_id, dependency_id), work_id):
                done["revived"] += 1
        quiet = moment - GRACE
        waiting = {
            i.id: i.question_id
            for i in items.values()
            if i.status in ON_A_QUESTION and i.question_id is not None and i.updated_at <= quiet
        }
        if waiting:
            try:
                done["resumed"] = await self.questions.resume_settled(waiting)
            except Exception as exc:
                raise_if_cancelling()
                log.warning("resuming work whose question was settled failed: %s", exc)
        for item in items.values():
            if item.status not in MESSAGE_CHECKED or item.updated_at > quiet:
                continue
            key = (item.id, item.updated_at)
            due = self._checked.get(key)
            if due is not None and due[0] > moment:
                continue
            enqueued = await self._try(self.queue.ensure_enqueued(item.id), item.id)
            if enqueued is None:
                continue  # not checked: the next sweep tries again
            done["enqueued"] += bool(enqueued)
            interval = GRACE if due is None else min(due[1] * 2, RECHECK_MAX)
            self._checked[key] = (moment + interval, interval)
            self._checked.move_to_end(key)
            while len(self._checked) > REMEMBERED:
                self._checked.popitem(last=False)
        return done

    @staticmethod
    async def _try(step: Awaitable[object], work_id: str) -> bool | None:
        """Whether the step repaired something; None when it failed (logged)."""
        try:
            return bool(await step)
        except Exception as exc:
            raise_if_cancelling()
            log.warning("repairing work %s failed: %s", work_id, exc)
            return None
