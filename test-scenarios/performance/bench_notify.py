"""Notifications (weft/notify/, docs/operator.md): how long from an agent's question to the
signed webhook's receiver having it, against a raw JetStream publish to a pull consumer's
delivery in the same run; and a burst of questions with dedupe and a rate limit on.

A real Weft (in this process, on this run's NATS) sends to a receiver on loopback
(testsupport/receivers.py). The burst: every question reaches a sink limited to
``rate`` sends a minute; it must receive no more than that per minute the burst spans,
every question must stay in the record, and every notice must be accounted for (sent or
rate-limited) in Weft's metrics.
"""

from __future__ import annotations

import asyncio
import time

import httpx
from benchlib import BenchContext, BenchResult, summarize
from nats.js.api import StreamConfig

from shared.models import Priority
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.settings import NatsSettings
from shared.work.questions import QuestionBook
from testsupport.receivers import http_receiver
from testsupport.serving import serve_in_loop
from testsupport.work import work_queue
from weft.app import create_app
from weft.settings import WeftSettings
from weft.spinup import DisabledSpinup

AGENT = "a" * 32
SECRET = "bench-notify-secret-0123"
RAW = "raw: JetStream publish -> pull consumer delivery"


async def _raw(nc_url: str, count: int, stream: str) -> list[float]:
    nc = await connect(url=nc_url)
    js = nc.jetstream()
    samples: list[float] = []
    try:
        await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
        sub = await js.pull_subscribe(f"{stream}.x", durable="bench", stream=stream)
        for n in range(count):
            start = time.perf_counter()
            await js.publish(f"{stream}.x", f"q{n}".encode())
            got = await sub.fetch(1, timeout=5)
            samples.append((time.perf_counter() - start) * 1000)
            await got[0].ack()
        await sub.unsubscribe()
        await js.delete_stream(stream)
    finally:
        await nc.close()
    return samples


def _sent(metrics: str, project: str, sink: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in metrics.splitlines():
        if (
            line.startswith("weft_notifications_total{")
            and f'sink="{sink}"' in line
            and f'project="{project}"' in line
        ):
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            counts[outcome] = float(line.rsplit(" ", 1)[1])
    return counts


async def run(ctx: BenchContext) -> list[BenchResult]:
    count = 10 if ctx.quick else 100
    burst = 50 if ctx.quick else 1000
    rate = 20 if ctx.quick else 100
    project = f"bench-notify-{time.monotonic_ns() % 10**9}"
    raw = await _raw(ctx.nats_url, count, f"BENCH-NOTIFY-{project.rsplit('-', 1)[1]}")
    settings = WeftSettings(project_id=project, nats=NatsSettings(url=ctx.nats_url), sweep_interval_s=1.0)
    nc = await connect(url=ctx.nats_url)
    latencies: list[float] = []
    try:
        async with (
            http_receiver() as receiver,
            serve_in_loop(create_app(settings, spinup=DisabledSpinup())) as weft,
            httpx.AsyncClient(base_url=weft.url, timeout=30) as api,
        ):
            hook = {
                "kind": "webhook",
                "url": f"{receiver.url}/hook",
                "secret": SECRET,
                "rate_per_minute": 6000,
            }
            (await api.put("/api/notify/sinks/fast", json=hook)).raise_for_status()
            book = QuestionBook(nc, ProjectNames(project), work_queue(nc, ProjectNames(project)))
            for n in range(count):
                start = time.monotonic()
                await book.ask(AGENT, f"question {n}?", priority=Priority.P1)
                got = await receiver.wait_for("/hook", n + 1)
                latencies.append((got[n].at - start) * 1000)

            (await api.delete("/api/notify/sinks/fast")).raise_for_status()
            limited = {"url": f"json://{receiver.url.removeprefix('http://')}/burst", "rate_per_minute": rate}
            (await api.put("/api/notify/sinks/burst", json=limited)).raise_for_status()
            await asyncio.sleep(2.5)  # the dispatcher's read of the sinks is at most 2 s old
            first_minute = time.time() // 60
            for start in range(0, burst, 50):
                await asyncio.gather(
                    *(
                        book.ask(AGENT, f"burst {n}?", priority=Priority.P0)
                        for n in range(start, min(burst, start + 50))
                    )
                )
            accounted: dict[str, float] = {}
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                accounted = _sent((await api.get("/metrics")).text, project, "burst")
                if sum(accounted.values()) >= burst:
                    break
                await asyncio.sleep(0.2)
            minutes = int(time.time() // 60 - first_minute) + 1
            received = len(receiver.at("/burst"))
            recorded = (await api.get("/api/questions", params={"status": "open", "limit": 1})).json()[
                "total"
            ]
    finally:
        await nc.close()
    assert sum(accounted.values()) == burst, accounted
    assert received <= rate * minutes, (received, rate, minutes)
    assert recorded == count + burst, recorded

    raw_result = summarize(RAW, raw)
    hook_result = summarize(
        "notify: question asked -> signed webhook received",
        latencies,
        baseline=RAW,
        target="p95 <= 250 ms on loopback",
    )
    burst_result = BenchResult(
        name=f"notify: {burst}-question burst, sink limited to {rate}/min",
        unit="notices",
        samples=burst,
        value=float(received),
        target=f"at most {rate} a minute reach the sink ({minutes} minute(s)); all {burst} stay recorded",
        extra={"outcomes": accounted, "minutes": minutes, "recorded": recorded},
    )
    return [raw_result, hook_result, burst_result]
