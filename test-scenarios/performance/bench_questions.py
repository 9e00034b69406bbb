"""Questions and the autonomy policy (shared/work/questions.py, docs/operator.md): what
asking costs now that the project's policy is read first, and listing the open questions
by urgency, each against the raw NATS work it stands on, in the same run.

- ask: ``QuestionBook.ask`` (the policy read, the record created, the ``question.asked``
  event) against a raw KV create of the same record in a bucket of its own.
- list by urgency: ``QuestionBook.listing(order="urgency")`` over N questions against the
  raw read of the same N records (the bucket's snapshot), which it is built on.
- escalation (docs/operator.md, Escalation): ``QuestionBook.escalate`` of a dead letter (the
  report written on the item compare-and-set, the question stored, both events) and an
  answer carried out (``retry: <instructions>``: the answer recorded, the decision on the
  item, its retry and queue message), each against the raw KV writes and publish they make.
"""

from __future__ import annotations

import time

from benchlib import BenchContext, BenchResult, summarize
from nats.aio.client import Client
from nats.js.kv import KeyValue

from shared.models import Diagnosis, Priority, Question, WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.jetstream import ensure_kv, snapshot
from shared.work.autonomy import AutonomyRule, AutonomySettings
from shared.work.questions import QuestionBook
from shared.work.rules import Claimant
from testsupport.work import work_queue

AGENT = "a" * 32
RAW_ASK = "raw: KV create of a question record"
RAW_LIST = "raw: read every question record (KV snapshot)"
RAW_ESCALATE = "raw: KV update of a work record + KV create of a question"
RAW_DECIDE = "raw: KV update of a question + 2 KV updates of a work record + a publish"


async def run(ctx: BenchContext) -> list[BenchResult]:
    count = 50 if ctx.quick else 1000
    rounds = 5 if ctx.quick else 20
    project = f"bench-questions-{time.monotonic_ns() % 10**9}"
    names = ProjectNames(project)
    nc = await connect(url=ctx.nats_url)
    raw_ask: list[float] = []
    asked: list[float] = []
    raw_list: list[float] = []
    listed: list[float] = []
    try:
        book = QuestionBook(nc, names, work_queue(nc, names))
        policy = AutonomySettings(rules=[AutonomyRule(category="security", mode="sync")])
        await book.autonomy.put(policy, by="bench")
        raw_kv = await ensure_kv(nc.jetstream(), f"bench-raw-questions-{project}")
        priorities = list(Priority)
        for n in range(count):
            record = Question(project_id=project, asked_by=AGENT, question=f"q{n}?")
            start = time.perf_counter()
            await raw_kv.create(record.id, record.to_json_bytes())
            raw_ask.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            await book.ask(AGENT, f"q{n}?", priority=priorities[n % 4], default_answer="go on")
            asked.append((time.perf_counter() - start) * 1000)
        kv = await book.bucket()
        for _ in range(rounds):
            start = time.perf_counter()
            await snapshot(kv)
            raw_list.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            page = await book.listing(limit=50, order="urgency")
            listed.append((time.perf_counter() - start) * 1000)
            assert page.total == count and page.items[0].priority is Priority.P0
        escalations = await _escalations(nc, ProjectNames(f"{project}-esc"), raw_kv, 20 if ctx.quick else 200)
        await nc.jetstream().delete_key_value(f"bench-raw-questions-{project}")
    finally:
        await nc.close()
    return [
        *escalations,
        summarize(RAW_ASK, raw_ask),
        summarize(
            "questions: ask (policy read, record, event)",
            asked,
            baseline=RAW_ASK,
            target="one policy read and one event above the record's create",
        ),
        summarize(RAW_LIST, raw_list),
        summarize(
            f"questions: list {count} by urgency (first page)",
            listed,
            baseline=RAW_LIST,
            target="the records' read plus a sort",
        ),
    ]


async def _escalations(nc: Client, names: ProjectNames, raw_kv: KeyValue, count: int) -> list[BenchResult]:
    queue = work_queue(nc, names)
    book = QuestionBook(nc, names, queue)
    coder = Claimant(AGENT, "generic", ("code",), ("default",))
    raw_escalate: list[float] = []
    escalated: list[float] = []
    raw_decide: list[float] = []
    decided: list[float] = []
    report = Diagnosis(total_s=1.0)
    raw_subject = f"bench-raw-escalation.{names.project_id}"
    await nc.jetstream().add_stream(name=f"BENCH-RAW-ESC-{names.project_id}", subjects=[raw_subject])
    for n in range(count):
        item = await queue.submit(
            WorkSubmission(task_id=f"t{n}", description="d", capability="code", max_attempts=1)
        )
        assert await queue.claim(coder) is not None
        await queue.fail(item.id, AGENT, "broken")
        dead = await queue.get(item.id)
        record = Question(project_id=names.project_id, asked_by=AGENT, question=f"e{n}?")
        start = time.perf_counter()
        revision = await raw_kv.put(f"w{n}", dead.to_json_bytes())
        await raw_kv.create(record.id, record.to_json_bytes())
        raw_escalate.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        asked = await book.escalate(dead, report, Priority.P1)
        escalated.append((time.perf_counter() - start) * 1000)
        assert asked is not None
        start = time.perf_counter()
        await raw_kv.put(record.id, record.to_json_bytes())
        revision = await raw_kv.update(f"w{n}", dead.to_json_bytes(), last=revision)
        await raw_kv.update(f"w{n}", dead.to_json_bytes(), last=revision)
        await nc.jetstream().publish(raw_subject, b"{}")
        raw_decide.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await book.answer(asked.id, "retry: smaller steps", by="bench")
        decided.append((time.perf_counter() - start) * 1000)
        assert (await queue.get(item.id)).status is WorkStatus.QUEUED
        assert await queue.claim(coder) is not None  # out of the way of the next one
        await queue.complete(item.id, AGENT, "done")
    await nc.jetstream().delete_stream(f"BENCH-RAW-ESC-{names.project_id}")
    return [
        summarize(RAW_ESCALATE, raw_escalate),
        summarize(
            "escalation: escalate a dead letter (report on the item, question, events)",
            escalated,
            baseline=RAW_ESCALATE,
            target="the item's compare-and-set (a read first) and the question's create, plus two events",
        ),
        summarize(RAW_DECIDE, raw_decide),
        summarize(
            "escalation: answer carried out (retry with new instructions)",
            decided,
            baseline=RAW_DECIDE,
            target="the answer, decision and retry compare-and-sets (each reads first), the queue message",
        ),
    ]
