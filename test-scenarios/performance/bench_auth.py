"""Scoped NATS credentials (issue 24): what they cost, against an open server in the same run.

Two bundled nats-servers with the same settings (``sync_interval`` 1 s, as Weft would run
them with ``LOOM_NATS_SYNC=1s``), one in operator mode as ``WEFT_NATS_AUTH=scoped`` starts it,
one open as plain ``make run`` starts it:

* connecting (connect, one round trip, close) with an agent's scoped credentials (a user JWT the
  server verifies and whose ~70 permissions it compiles) and without any;
* Warp's channel path (send, then read the latest message) and work path (broadcast, claim,
  complete) through the same modules Warp uses, on a scoped connection (the server checks every
  publish and subscription against the permission list) and on an open one;
* Weft issuing one agent's credentials (a fresh nkey, a signed JWT, one stream-names request).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from benchlib import BenchContext, BenchResult, summarize
from nats.aio.client import Client as NatsClient
from pydantic import SecretStr

from shared.channels import Viewer
from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, ServerConfig
from shared.settings import NatsSettings
from shared.work.rules import Claimant
from testsupport.work import work_queue
from warp.channels import ChannelService
from warp.config import ConfigLoader
from weft.runtime import open_nats
from weft.settings import WeftSettings

Op = Callable[[], Awaitable[None]]


def _warp_ops(ctx: BenchContext, nc: NatsClient, project: str, agent_id: str) -> tuple[Op, Op]:
    """Warp's channel path and work path on ``nc``, through the modules Warp's tools call."""
    names = ProjectNames(project)
    channels = ChannelService(nc, nc.jetstream(), names, ConfigLoader(ctx.scratch, home=ctx.scratch))
    viewer = Viewer(agent_id=agent_id, user_id="0" * 16)

    async def channel_op() -> None:
        await channels.send("roadmap", "plan", sender_id=agent_id, sender_handle="b", sender_user="0" * 16)
        page = await channels.read("roadmap", viewer, limit=1)
        assert page.messages

    queue = work_queue(nc, names)
    claimant = Claimant(agent_id=agent_id, agent_type="generic", capabilities=("code",))

    async def work_op() -> None:
        item = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"))
        got = await queue.claim(claimant)
        assert got is not None and got.id == item.id
        await queue.complete(item.id, agent_id)

    return channel_op, work_op


async def _interleaved(first: Op, second: Op, n: int, warmup: int = 5) -> tuple[list[float], list[float]]:
    """Time two operations alternately, so whatever else loads the machine falls on both alike."""
    a: list[float] = []
    b: list[float] = []
    for i in range(n + warmup):
        for op, out in ((first, a), (second, b)):
            start = time.perf_counter()
            await op()
            if i >= warmup:
                out.append((time.perf_counter() - start) * 1000)
    return a, b


async def run(ctx: BenchContext) -> list[BenchResult]:
    n = ctx.iterations(200, 20)
    previous = os.environ.get("LOOM_DATA_DIR")
    os.environ["LOOM_DATA_DIR"] = str(ctx.scratch / "scoped-weft")
    try:
        settings = WeftSettings(
            project_id="bench-auth", nats_auth="scoped", nats_port=-1, nats_ws_port=-1, nats_sync="1s"
        )
        runtime = await open_nats(settings)
    finally:
        if previous is None:
            os.environ.pop("LOOM_DATA_DIR", None)
        else:
            os.environ["LOOM_DATA_DIR"] = previous
    authority = runtime.authority
    assert authority is not None and runtime.server is not None
    scoped_url = runtime.server.url
    await authority.start()
    plain = EmbeddedNatsServer(ServerConfig(store_dir=ctx.scratch / "open-nats", sync_interval="1s")).start()
    open_url = plain.url
    results: list[BenchResult] = []
    try:
        project = f"bench-{uuid.uuid4().hex[:8]}"
        issue_ms: list[float] = []
        issued: Any = None
        for _ in range(ctx.iterations(50, 5)):
            start = time.perf_counter()
            issued = await authority.issue(project, channels=("roadmap",))
            issue_ms.append((time.perf_counter() - start) * 1000)
        results.append(summarize("auth: Weft issues an agent's credentials", issue_ms))
        creds = NatsSettings(creds_content=SecretStr(issued.creds.get_secret_value()))

        async def connect_open() -> None:
            nc = await connect(url=open_url)
            await nc.flush()
            await nc.close()

        async def connect_scoped() -> None:
            nc = await connect(creds, url=scoped_url)
            await nc.flush()
            await nc.close()

        open_connect, scoped_connect = await _interleaved(connect_open, connect_scoped, n, warmup=3)
        open_nc = await connect(url=open_url)
        scoped_nc = await connect(creds, url=scoped_url)
        try:
            open_chan_op, open_work_op = _warp_ops(ctx, open_nc, project, issued.agent_id)
            scoped_chan_op, scoped_work_op = _warp_ops(ctx, scoped_nc, project, issued.agent_id)
            open_chan, scoped_chan = await _interleaved(open_chan_op, scoped_chan_op, n)
            open_work, scoped_work = await _interleaved(open_work_op, scoped_work_op, n)
        finally:
            await open_nc.close()
            await scoped_nc.close()
        open_connect_name = "auth: connect, open server"
        open_chan_name = "auth: warp channel send+read, open"
        open_work_name = "auth: warp work broadcast->claim->complete, open"
        results += [
            summarize(open_connect_name, open_connect),
            summarize("auth: connect, scoped agent credentials", scoped_connect, baseline=open_connect_name),
            summarize(open_chan_name, open_chan),
            summarize("auth: warp channel send+read, scoped", scoped_chan, baseline=open_chan_name),
            summarize(open_work_name, open_work),
            summarize(
                "auth: warp work broadcast->claim->complete, scoped", scoped_work, baseline=open_work_name
            ),
        ]
    finally:
        await authority.stop()
        await runtime.close()
        plain.stop()
    return results
