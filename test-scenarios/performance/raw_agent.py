"""Raw agents: each a process with one nats-py connection and the work queue Warp uses, with
none of Warp around it; ``bench_fleet``'s baseline of what an agent's claim costs in a
process of its own (docs/performance.md, "raw agent processes").

``python raw_agent.py NATS_URL PROJECT IN,OUT [IN,OUT ...]``: this process imports what an
agent needs once, then forks one agent per pair of pipe descriptors it inherited (so 200 of
them fit in memory beside 200 Warps), prints the agents' pids on one line and waits for them.
Each agent reads JSON-RPC lines on IN and answers on OUT, the shape the bench's ``RawRpc``
speaks: ``tools/call`` of ``claim`` (the next item for this agent, or none), ``complete``
(``work_id``) and ``noop`` (no NATS: the agent's floor); any other request is answered
empty. An agent ends when its IN closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from shared.names import ProjectNames  # noqa: E402
from shared.nats.client import connect  # noqa: E402
from shared.work.queue import WorkQueue  # noqa: E402
from shared.work.rules import Claimant  # noqa: E402
from testsupport.work import work_queue  # noqa: E402


async def _answer(queue: WorkQueue, me: Claimant, request: dict[str, Any]) -> dict[str, Any]:
    params = request.get("params") or {}
    name = params.get("name") if request.get("method") == "tools/call" else None
    if name == "claim":
        item = await queue.claim(me)
        return {"structuredContent": {"claimed": item is not None, "item": {"id": item.id} if item else None}}
    if name == "complete":
        await queue.complete(str(params["arguments"]["work_id"]), me.agent_id)
    return {"structuredContent": {}}


async def serve(nats_url: str, project: str, read_fd: int, write_fd: int) -> None:
    """One agent: its connection, then the requests on ``read_fd`` until it closes."""
    nc = await connect(url=nats_url, name="raw-agent")
    queue = work_queue(nc, ProjectNames(project))
    me = Claimant(agent_id=uuid.uuid4().hex, agent_type="generic", capabilities=("code",))
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0))
    out = os.fdopen(write_fd, "wb", 0)
    running: set[asyncio.Task[None]] = set()

    async def reply(request: dict[str, Any]) -> None:
        try:
            answer: dict[str, Any] = {"result": await _answer(queue, me, request)}
        except Exception as exc:  # the driver fails the call, naming what went wrong
            answer = {"error": {"code": -32000, "message": f"{type(exc).__name__}: {exc}"}}
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n")

    try:
        while line := await reader.readline():
            request = json.loads(line)
            if "id" in request:  # a notification needs no answer
                task = asyncio.create_task(reply(request))
                running.add(task)
                task.add_done_callback(running.discard)
        await asyncio.gather(*running)
    finally:
        await nc.close()
        out.close()


def main(nats_url: str, project: str, pairs: list[tuple[int, int]]) -> int:
    children: list[int] = []
    for read_fd, write_fd in pairs:
        pid = os.fork()
        if pid == 0:  # the agent: only its own pair stays open
            for other in pairs:
                if other != (read_fd, write_fd):
                    os.close(other[0])
                    os.close(other[1])
            asyncio.run(serve(nats_url, project, read_fd, write_fd))
            os._exit(0)
        children.append(pid)
    for read_fd, write_fd in pairs:
        os.close(read_fd)
        os.close(write_fd)
    print(" ".join(map(str, children)), flush=True)
    failed = 0
    for pid in children:
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    fds = [tuple(int(fd) for fd in pair.split(",")) for pair in sys.argv[3:]]
    sys.exit(main(sys.argv[1], sys.argv[2], [(r, w) for r, w in fds]))
