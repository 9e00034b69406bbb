"""The public client (docs/client.md): what ``LoomClient`` adds to a raw httpx call for the
same request, in one process against a Weft started here (its typed models validated on
every answer): reading one item, listing 50, submitting one. The async client's read too.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from bench_shuttle import TOKEN, weft_running
from benchlib import BenchContext, BenchResult, summarize

from loom import AsyncLoomClient, LoomClient

RAW_GET = "raw httpx: GET one item"
RAW_LIST = "raw httpx: GET 50 items"
RAW_SUBMIT = "raw httpx: POST one item"


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def _sync_rounds(url: str, project: str, runs: int, samples: dict[str, list[float]]) -> list[str]:
    """The synchronous client and raw httpx, interleaved (in a thread of its own)."""
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}", "X-Loom-Project": project}
    with (
        httpx.Client(base_url=url, headers=headers) as raw,
        LoomClient(url, token=TOKEN, project=project) as loom,
    ):
        ids = [loom.submit(f"bench {n}", capability="bench").id for n in range(50)]
        for n in range(runs):
            start = time.perf_counter()
            raw.get(f"/api/work/{ids[n % 50]}").json()
            samples["rg"].append(_ms(start))
            start = time.perf_counter()
            loom.work(ids[n % 50])
            samples["cg"].append(_ms(start))
            start = time.perf_counter()
            raw.get("/api/work", params={"limit": 50}).json()
            samples["rl"].append(_ms(start))
            start = time.perf_counter()
            loom.work_list(limit=50)
            samples["cl"].append(_ms(start))
            start = time.perf_counter()
            raw.post(
                "/api/work", json={"task_id": "raw", "description": "bench", "capability": "bench"}
            ).json()
            samples["rs"].append(_ms(start))
            start = time.perf_counter()
            loom.submit("bench", capability="bench", task_id="client")
            samples["cs"].append(_ms(start))
    return ids


async def run(ctx: BenchContext) -> list[BenchResult]:
    runs = ctx.iterations(200, 20)
    project = f"bench-client-{uuid.uuid4().hex[:8]}"
    samples: dict[str, list[float]] = {k: [] for k in ("rg", "cg", "rl", "cl", "rs", "cs", "ag")}
    with weft_running(ctx.nats_url) as url:
        ids = await asyncio.to_thread(_sync_rounds, url, project, runs, samples)

        async def async_reads() -> None:
            async with AsyncLoomClient(url, token=TOKEN, project=project) as aloom:
                for n in range(runs):
                    start = time.perf_counter()
                    await aloom.work(ids[n % 50])
                    samples["ag"].append(_ms(start))

        await async_reads()
    return [
        summarize(RAW_GET, samples["rg"]),
        summarize("client: LoomClient.work (typed WorkItem)", samples["cg"], baseline=RAW_GET),
        summarize("client: AsyncLoomClient.work", samples["ag"], baseline=RAW_GET),
        summarize(RAW_LIST, samples["rl"]),
        summarize("client: LoomClient.work_list(limit=50)", samples["cl"], baseline=RAW_LIST),
        summarize(RAW_SUBMIT, samples["rs"]),
        summarize("client: LoomClient.submit", samples["cs"], baseline=RAW_SUBMIT),
    ]
