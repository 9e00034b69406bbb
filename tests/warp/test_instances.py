"""Instance ids for concurrent Warp processes in one folder (warp.instances)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nats.aio.client import Client as NatsClient
from warp_harness import make_identity

from shared.names import ProjectNames
from warp.instances import InstanceLock

BASE = "d" * 32


def lock(nc: NatsClient, project_id: str, *, host: str = "test-host", pid: int | None = None) -> InstanceLock:
    return InstanceLock(
        nc.jetstream(),
        ProjectNames(project_id),
        hostname=host,
        pid=pid or os.getpid(),
        nonce=os.urandom(8).hex(),
    )


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_second_process_gets_the_next_instance(nc: NatsClient, project_id: str, tmp_path: Path) -> None:
    base = make_identity(project_id, tmp_path, BASE)
    first = await lock(nc, project_id).acquire(base)
    second = await lock(nc, project_id).acquire(base)
    assert first.instance == 0 and first.agent_id == BASE
    assert second.instance == 1 and second.agent_id not in (BASE,)
    assert second.base_agent_id == BASE


async def test_released_instance_is_reused(nc: NatsClient, project_id: str, tmp_path: Path) -> None:
    base = make_identity(project_id, tmp_path, BASE)
    holder = lock(nc, project_id)
    assert (await holder.acquire(base)).instance == 0
    await holder.release()
    assert (await lock(nc, project_id).acquire(base)).instance == 0


async def test_lock_of_a_dead_process_on_this_host_is_taken_over(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    base = make_identity(project_id, tmp_path, BASE)
    crashed = lock(nc, project_id, pid=dead_pid())
    assert (await crashed.acquire(base)).instance == 0
    restarted = await lock(nc, project_id).acquire(base)
    assert restarted.instance == 0  # same id, same inbox, same registry entry


async def test_lock_held_on_another_host_is_respected(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    base = make_identity(project_id, tmp_path, BASE)
    assert (await lock(nc, project_id, host="elsewhere", pid=dead_pid()).acquire(base)).instance == 0
    assert (await lock(nc, project_id).acquire(base)).instance == 1


async def test_explicit_instance_and_refresh_after_loss(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    base = make_identity(project_id, tmp_path, BASE)
    pinned = lock(nc, project_id)
    ident = await pinned.acquire(base, explicit=3)
    assert ident.instance == 3
    kv = await nc.jetstream().key_value(ProjectNames(project_id).instance_locks_bucket)
    await kv.delete(ident.agent_id)
    await pinned.refresh()  # the key vanished (TTL): the refresh takes it again
    entry = await kv.get(ident.agent_id)
    assert entry.value and pinned.me.nonce.encode() in entry.value
