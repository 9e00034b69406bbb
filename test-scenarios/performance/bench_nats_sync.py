"""What ``LOOM_NATS_SYNC=always`` (Weft's bundled server: fsync every write) costs against
nats-server's default ``sync_interval`` (2 minutes), measured side by side in one run.

Two extra servers, both with their JetStream data in the run's scratch folder (the same
disk): raw nats-py publishes to a file-storage stream, acked, one at a time (latency) and
32 at once (throughput). The rounds alternate between the servers so that a change in the
machine's load falls on both. The default-interval rows are the baseline of the ``always``
rows.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from benchlib import BenchContext, BenchResult, concurrently, summarize, time_async
from nats.aio.client import Client as NatsClient
from nats.js.api import StorageType, StreamConfig

from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, ServerConfig

PAYLOAD = b"x" * 512
"""About the size of a work record."""
CONCURRENCY = 32
ROUNDS = 3


@dataclass
class Side:
    label: str
    sync_interval: str | None
    server: EmbeddedNatsServer | None = None
    nc: NatsClient | None = None
    latency_ms: list[float] = field(default_factory=list)
    published: int = 0
    elapsed_s: float = 0.0

    @property
    def latency_name(self) -> str:
        return f"nats sync {self.label}: js publish->ack"

    @property
    def throughput_name(self) -> str:
        return f"nats sync {self.label}: js publish, {CONCURRENCY} conc."


async def _start(ctx: BenchContext, side: Side) -> None:
    folder = ctx.scratch / f"sync-{uuid.uuid4().hex[:8]}"
    config = ServerConfig(store_dir=folder / "jetstream", sync_interval=side.sync_interval)
    side.server = await asyncio.to_thread(EmbeddedNatsServer(config).start)
    side.nc = await connect(url=side.server.url, name=f"bench-sync-{side.label}")
    await side.nc.jetstream().add_stream(
        StreamConfig(name="BENCH-SYNC", subjects=["bench.sync.>"], storage=StorageType.FILE)
    )


async def _round(side: Side, latency_n: int, throughput_n: int) -> None:
    assert side.nc is not None
    js = side.nc.jetstream()

    async def one() -> None:
        await js.publish("bench.sync.one", PAYLOAD)

    side.latency_ms += await time_async(one, latency_n, warmup=3)
    side.elapsed_s += await concurrently(
        throughput_n, CONCURRENCY, lambda _: js.publish("bench.sync.many", PAYLOAD)
    )
    side.published += throughput_n


async def _stop(side: Side) -> None:
    if side.nc is not None:
        await side.nc.close()
    if side.server is not None:
        await asyncio.to_thread(side.server.stop)


async def run(ctx: BenchContext) -> list[BenchResult]:
    default, always = Side("2m (default)", None), Side("always", "always")
    latency_n = ctx.iterations(200, 10)
    throughput_n = ctx.iterations(2000, 100)
    try:
        for side in (default, always):
            await _start(ctx, side)
        for _ in range(ROUNDS):
            for side in (default, always):
                await _round(side, latency_n, throughput_n)
    finally:
        for side in (default, always):
            await _stop(side)
    results: list[BenchResult] = []
    for side in (default, always):
        baseline = None if side is default else default.latency_name
        results.append(summarize(side.latency_name, side.latency_ms, baseline=baseline))
    rates = {side.label: side.published / side.elapsed_s for side in (default, always)}
    for side in (default, always):
        results.append(
            BenchResult(
                name=side.throughput_name,
                unit="ops",
                samples=side.published,
                throughput=rates[side.label],
                baseline=None if side is default else default.throughput_name,
                extra={"vs_default": rates[side.label] / rates[default.label]},
            )
        )
    return results
