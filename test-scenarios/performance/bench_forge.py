"""Forge mode's webhook (weft/routes/hooks.py, docs/landing.md): how long from GitHub's
delivery of a merged pull request to the item it lands being completed, against the same
signed delivery to a receiver that only checks the signature, in the same run.

Items wait on their pull requests in a real Weft (in this process, on this run's NATS) with
the poll set to an hour, so only the webhook settles them; the GitHub stand-in
(testsupport/github.py) merges each and delivers the signed ``pull_request`` event.
"""

from __future__ import annotations

import asyncio
import time

import httpx
from benchlib import BenchContext, BenchResult, summarize
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from shared.git.forge import GitHub
from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.settings import NatsSettings
from shared.signing import signed
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.github import github_stand_in
from testsupport.serving import serve_in_loop
from testsupport.work import hand_in, work_queue
from weft.app import create_app
from weft.settings import WeftSettings
from weft.spinup import DisabledSpinup

TOKEN = "ghp_bench_token"
SECRET = "bench-hook-secret"
WORKER = Claimant(agent_id="a" * 32, agent_type="generic", capabilities=("code",))
LANDER = Claimant(agent_id="d" * 32, agent_type="lander", capabilities=("land",))
RAW = "raw: signed delivery to a receiver that checks it"


def _receiver() -> FastAPI:
    app = FastAPI()

    @app.post("/hook")
    async def hook(request: Request) -> JSONResponse:
        body = await request.body()
        ok = signed(SECRET, body, request.headers.get("X-Hub-Signature-256"))
        return JSONResponse({"ok": ok}, status_code=202 if ok else 401)

    return app


async def run(ctx: BenchContext) -> list[BenchResult]:
    count = 10 if ctx.quick else 100
    project = f"bench-forge-{time.monotonic_ns() % 10**9}"
    names = ProjectNames(project)
    nc = await connect(url=ctx.nats_url)
    settings = WeftSettings(
        project_id=project,
        nats=NatsSettings(url=ctx.nats_url),
        github_token=TOKEN,
        github_webhook_secret=SECRET,
        forge_poll_s=3600,
    )
    raw: list[float] = []
    hooked: list[float] = []
    by_hook = 0
    try:
        async with (
            github_stand_in("acme/app", TOKEN) as gh,
            serve_in_loop(create_app(settings, spinup=DisabledSpinup())) as weft,
            serve_in_loop(_receiver()) as receiver,
            httpx.AsyncClient(base_url=weft.url, timeout=30) as api,
        ):
            repo = {"url": str(make_origin(ctx.scratch, name="forge-bench.git")), "forge": "github"}
            repo |= {"github_repository": "acme/app", "github_api_url": gh.url}
            (await api.put("/api/repository", json=repo)).raise_for_status()
            q = work_queue(nc, names)
            github = GitHub(gh.url, "acme/app", TOKEN)
            waiting = []
            for n in range(count):
                item = await q.submit(WorkSubmission(task_id=f"f{n}", description="d", capability="code"))
                assert (await q.claim(WORKER)) is not None
                await hand_in(q, item.id, WORKER.agent_id, f"loom/f{n}")
                assert (await q.claim(LANDER)) is not None
                pr = await github.open_pull_request(f"loom/f{n}", "main", f"f{n}", "b")
                await q.await_forge(item.id, LANDER.agent_id, pr.number, pr.url)
                waiting.append((item.id, pr.number))
            for work_id, _ in waiting:  # Weft's copy holds every waiting item
                for _ in range(400):
                    got = (await api.get(f"/api/work/{work_id}")).json()
                    if (got.get("landing") or {}).get("pull_request"):
                        break
                    await asyncio.sleep(0.05)
            for _, number in waiting:
                gh.merge(number, "f" * 40)
                gh.hooks[:] = [(f"{receiver.url}/hook", SECRET)]
                start = time.perf_counter()
                assert (await gh.deliver(number))[0].status_code == 202
                raw.append((time.perf_counter() - start) * 1000)
                gh.hooks[:] = [(f"{weft.url}/hooks/github?project={project}", SECRET)]
                start = time.perf_counter()
                answer = (await gh.deliver(number))[0]
                hooked.append((time.perf_counter() - start) * 1000)
                # 1, or 0 when Weft's own poll met the merged pull request first (its first
                # look at a waiting item is at once; on a loaded host it can come after the
                # merge): either way the item completes once, checked below
                assert answer.json()["settled"] in (0, 1), answer.text
                by_hook += answer.json()["settled"]
            done = [(await api.get(f"/api/work/{w}")).json()["status"] for w, _ in waiting]
            assert done == ["completed"] * count, done
    finally:
        await nc.close()
    raw_result = summarize(RAW, raw)
    hook_result = summarize(
        "forge: merged -> completed through GitHub's webhook",
        hooked,
        baseline=RAW,
        target="well under the poll it replaces (WEFT_FORGE_POLL_S, 60 s)",
        extra={"settled_by_hook": by_hook},
    )
    return [raw_result, hook_result]
