"""The console in a real browser (Debian's chromium via Playwright) over a real ``weft serve``
with 1,000 agents and 10,000 work records:

* first paint of the fleet view: navigation start -> the frame after the fleet table
  was drawn with the registry's agents (the page's ``loom:fleet-painted`` mark, read
  through the Performance API); a fresh page each time, once the last one had read every
  work record (``loom:work-loaded``, reported too);
* event -> page: a work item submitted over REST -> its row in the work view (a
  ``MutationObserver`` in the page stamps the row's arrival; both clocks are this
  machine's), with every record loaded.

* memory soak (only with ``--soak``, e.g. ``run.py --soak 10m --only console``): the work
  view open while one held item reports progress about 40 times a second (a ``work.progress``
  event each, the set of items and agents unchanged) for the soak's duration, cut into ten
  windows; after each, a garbage collection (DevTools protocol) and the page's JS heap and
  DOM node count. Flat means no growth from the first window to the last.

No raw baseline: nothing else draws this page. Without chromium the module says so and
reports nothing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp
from bench_weft import start_weft, stop_weft
from benchlib import BenchContext, BenchResult, summarize

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from testsupport.browser import CHROMIUM_ARGS, chromium_path
from testsupport.work import work_queue

# stamps each work row as it is added, keyed by its work id
OBSERVE_ROWS = """() => {
  window.__rowSeen = {};
  const body = document.querySelector('#work-items tbody');
  new MutationObserver(() => {
    const now = Date.now();
    for (const row of body.querySelectorAll('tr[data-work-id]')) {
      if (!(row.dataset.workId in window.__rowSeen)) window.__rowSeen[row.dataset.workId] = now;
    }
  }).observe(body, { childList: true });
}"""

# (functions, not expressions: the console's CSP allows no eval of strings)
PAINTED = "() => performance.getEntriesByName('loom:fleet-painted').length > 0"
WORK_LOADED = "() => performance.getEntriesByName('loom:work-loaded').length > 0"
ALL_LOADED = """(records) => {
  const live = document.querySelector('#live')?.textContent === 'live';
  const info = document.querySelector('#work-items + .pager span')?.textContent || '';
  const shown = info.match(/ of (\\d+) /);
  return live && shown !== null && Number(shown[1]) >= records;
}"""
ROW_SEEN = "(id) => window.__rowSeen[id]"


async def _fill(nc: Any, names: ProjectNames, agents: int, records: int) -> None:
    registry = Registry(nc.jetstream(), names)
    queue = work_queue(nc, names)
    sem = asyncio.Semaphore(64)

    async def agent(i: int) -> None:
        async with sem:
            await registry.put(
                AgentEntry(
                    agent_id=uuid.uuid4().hex,
                    handle=f"agent-{i:04d}",
                    agent_type=("claude-code", "copilot", "generic")[i % 3],
                    project_id=names.project_id,
                    user_id="0123456789abcdef",
                    capabilities=["code", "review"] if i % 2 else ["docs"],
                    heartbeat_interval_s=3600,
                )
            )

    async def item(i: int) -> None:
        async with sem:
            await queue.submit(
                WorkSubmission(task_id=f"w{i}", description=f"work record {i}", capability="bulk")
            )

    await asyncio.gather(*(agent(i) for i in range(agents)))
    await asyncio.gather(*(item(i) for i in range(records)))


async def run(ctx: BenchContext) -> list[BenchResult]:
    from playwright.async_api import async_playwright

    path = chromium_path()
    if path is None:
        print("bench_console: chromium not found (apt-get install chromium); no console rows", flush=True)
        return []
    agents, records = (100, 500) if ctx.quick else (1000, 10_000)
    project = f"bench-console-{uuid.uuid4().hex[:8]}"
    names = ProjectNames(project)
    nc = await connect(url=ctx.nats_url, name="bench-console")
    proc, base = await start_weft(ctx, project)
    try:
        await _fill(nc, names, agents, records)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1400, "height": 900})
                paints: list[float] = []
                loads: list[float] = []
                for _ in range(ctx.iterations(20, 3)):
                    await page.goto("about:blank")  # a fresh page load, not a hash change
                    await page.goto(f"{base}/?project={project}#fleet")
                    await page.wait_for_function(PAINTED, timeout=30_000)
                    rows = await page.locator("#agents tbody tr").count()
                    assert rows == 100, f"the fleet view drew {rows} rows"
                    paints.append(
                        await page.evaluate("performance.getEntriesByName('loom:fleet-painted')[0].startTime")
                    )
                    # every record read before the next load (else Weft still serves this one's)
                    await page.wait_for_function(WORK_LOADED, timeout=60_000)
                    loads.append(
                        await page.evaluate("performance.getEntriesByName('loom:work-loaded')[0].startTime")
                    )
                latencies = await _event_to_page(ctx, page, base, project, records)
                soaked = await _memory_soak(page, nc, project, ctx.soak_s) if ctx.soak_s else []
            finally:
                await browser.close()
    finally:
        stop_weft(proc)
        await nc.close()
    return [
        summarize(
            f"console: first paint of the fleet view, {agents} agents, {records} records",
            paints,
            target="<= 1 s",
        ),
        summarize(f"console: every work record read after navigation, {records} records", loads),
        summarize(
            f"console: event -> page (REST submit -> row in the work view), {records} records",
            latencies,
            target="p95 <= 250 ms",
        ),
        *soaked,
    ]


async def _event_to_page(ctx: BenchContext, page: Any, base: str, project: str, records: int) -> list[float]:
    await page.goto(f"{base}/?project={project}#work")
    await page.wait_for_function(ALL_LOADED, arg=records, timeout=60_000)
    await page.evaluate(OBSERVE_ROWS)
    samples: list[float] = []
    headers = {"X-Loom-Project": project, "Content-Type": "application/json"}
    async with aiohttp.ClientSession(base_url=base, headers=headers) as http:
        for i in range(ctx.iterations(100, 10)):
            sent = time.time() * 1000
            async with http.post(
                "/api/work", json={"task_id": f"e{i}", "description": "event to page", "capability": "live"}
            ) as response:
                work_id = (await response.json())["id"]
            seen = await page.wait_for_function(ROW_SEEN, arg=work_id, timeout=10_000)
            samples.append(float(await seen.json_value()) - sent)
    return samples


async def _memory_soak(page: Any, nc: Any, project: str, seconds: float) -> list[BenchResult]:
    """The page's heap and DOM over ``seconds`` of events about a fixed set of items."""
    from shared.work.rules import Claimant

    names = ProjectNames(project)
    queue = work_queue(nc, names)
    agent_id = uuid.uuid4().hex
    await Registry(nc.jetstream(), names).put(
        AgentEntry(
            agent_id=agent_id,
            handle="soaker",
            agent_type="generic",
            project_id=project,
            user_id="0123456789abcdef",
            capabilities=["soak"],
            heartbeat_interval_s=3600,
        )
    )
    held = await queue.submit(WorkSubmission(task_id="soak", description="soak", capability="soak"))
    claimant = Claimant(agent_id=agent_id, agent_type="generic", capabilities=("soak",))
    for _ in range(200):  # the queue consumer may need a moment after the first submit
        if await queue.claim(claimant) is not None:
            break
        await asyncio.sleep(0.05)
    else:
        raise RuntimeError("the soak's item could not be claimed")
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Performance.enable")

    async def measure() -> tuple[float, float]:
        await cdp.send("HeapProfiler.collectGarbage")
        used = (await cdp.send("Runtime.getHeapUsage"))["usedSize"] / 1e6
        metrics = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
        return used, float(metrics.get("Nodes", 0))

    windows, events = 10, 0
    heap: list[float] = []
    nodes: list[float] = []
    for _ in range(windows):
        until = time.monotonic() + seconds / windows
        while time.monotonic() < until:
            await queue.progress(held.id, agent_id, events % 100, f"step {events}")
            events += 1
            await asyncio.sleep(0.02)
        used, count = await measure()
        heap.append(used)
        nodes.append(count)
    row = BenchResult(
        name=f"console soak: JS heap after GC, last window ({seconds:g} s of events)",
        unit="MB",
        samples=windows,
        value=round(heap[-1], 2),
        target="flat",
    )
    row.extra.update(
        events=events,
        heap_mb=[round(h, 2) for h in heap],
        growth_mb=round(heap[-1] - heap[0], 2),
        dom_nodes=nodes,
    )
    dom = BenchResult(
        name="console soak: DOM nodes, last window",
        unit="nodes",
        samples=windows,
        value=nodes[-1],
        target="flat",
    )
    dom.extra["growth"] = nodes[-1] - nodes[0]
    return [row, dom]
