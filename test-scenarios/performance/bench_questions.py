"""Questions and the autonomy policy (shared/work/questions.py, docs/operator.md): what
asking costs now that the project's policy is read first, and listing the open questions
by urgency, each against the raw NATS work it stands on, in the same run.

- ask: ``QuestionBook.ask`` (the policy read, the record created, the ``question.asked``
  event) against a raw KV create of the same record in a bucket of its own.
- list by urgency: ``QuestionBook.listing(order="urgency")`` over N questions against the
  raw read of the same N records (the bucket's snapshot), which it is built on.
"""

from __future__ import annotations

import time

from benchlib import BenchContext, BenchResult, summarize

from shared.models import Priority, Question
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.jetstream import ensure_kv, snapshot
from shared.work.autonomy import AutonomyRule, AutonomySettings
from shared.work.questions import QuestionBook
from testsupport.work import work_queue

AGENT = "a" * 32
RAW_ASK = "raw: KV create of a question record"
RAW_LIST = "raw: read every question record (KV snapshot)"


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
        await nc.jetstream().delete_key_value(f"bench-raw-questions-{project}")
    finally:
        await nc.close()
    return [
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
