"""Instance ids for concurrent Warp processes in one folder (warp.instances)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from nats.aio.client import Client as NatsClient
from warp_harness import WarpProc, eventually, make_identity, spawn_warp

from shared.identity import base_agent_id
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port
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


# -- two real Warp processes in one folder -----------------------------------------------

IDENTITY_TOOLS = ("warp_handle_get", "warp_registry_get_info", "pattern_health")
"""Tools whose answer carries this process's agent id (``pattern_health`` with ``--with-memory``)."""


def _folder_env(url: str, project_id: str, project: Path, home: Path, **extra: str) -> dict[str, str]:
    """No ``LOOM_AGENT_ID``: both processes derive the same base id from host + folder."""
    home.mkdir(exist_ok=True)
    return {
        "NATS_URL": url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(project),
        "HOME": str(home),
        "LOOM_LOG_LEVEL": "INFO",
        **extra,
    }


async def _answers(w: WarpProc) -> dict[str, types.CallToolResult]:
    """What each identity-bearing tool answers right now (an error is an answer too)."""
    return {name: await w.call(name) for name in IDENTITY_TOOLS}


def _rendered(result: types.CallToolResult) -> str:
    """Everything an agent reads in a tool answer: its texts and its structured content."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return json.dumps({"texts": texts, "structured": result.structured_content})


def _settled(answers: dict[str, types.CallToolResult]) -> bool:
    handle, info, health = (answers[name] for name in IDENTITY_TOOLS)
    return (
        not handle.is_error
        and bool((handle.structured_content or {}).get("connected"))
        and not info.is_error
        and not health.is_error
        and (health.structured_content or {}).get("status") == "ok"
    )


async def test_two_warps_in_one_folder_never_answer_with_each_others_id(
    project_id: str, project_dir: Path, tmp_path: Path
) -> None:
    """Issue 21, defect 3: a Warp must not show another instance's id before it has its own.

    Deterministic without any timing: both processes start against a port where
    no nats-server listens yet, so neither can take an instance lock until the
    test starts the server there. Every answer collected before that moment
    therefore comes from a process whose instance is not settled; Warp used to
    answer with the plain (instance 0) id then, and whichever process ended up
    instance 1 had thereby shown the other's id - every run, whatever the
    scheduling. After the server starts, both are polled until settled, so the
    window where one has its lock and the other not yet is covered too.
    """
    port = free_port()
    env = _folder_env(
        f"nats://127.0.0.1:{port}",
        project_id,
        project_dir,
        tmp_path / "home",
        LOOM_WARP_READY_WAIT_S="0",  # answer "not ready" at once while NATS is away
        LOOM_AUTO_REGISTER="1",  # so warp_registry_get_info has an entry to show once settled
    )
    seen: dict[str, list[types.CallToolResult]] = {"a": [], "b": []}
    async with (
        spawn_warp(env, tmp_path, name="a", args=("--with-memory",)) as a,
        spawn_warp(env, tmp_path, name="b", args=("--with-memory",)) as b,
    ):
        procs = {"a": a, "b": b}
        for key, w in procs.items():
            early = await _answers(w)
            seen[key].extend(early.values())
            handle = early["warp_handle_get"].structured_content
            assert handle is not None and not handle["connected"]
            assert handle["agent_id"] is None and handle["instance"] is None  # not ready, no one's id
            assert early["warp_registry_get_info"].is_error
            health = early["pattern_health"].structured_content
            assert health is not None and health["identity"] is None
            renamed = await w.call("warp_handle_set", {"handle": f"early-{key}"})
            assert not renamed.is_error and renamed.structured_content is not None
            assert renamed.structured_content["agent_id"] is None
            seen[key].append(renamed)

        final: dict[str, dict[str, Any]] = {}
        with EmbeddedNatsServer(ServerConfig(port=port)):

            async def both_settled() -> bool:
                for key, w in procs.items():
                    if key in final:
                        continue
                    now = await _answers(w)
                    seen[key].extend(now.values())
                    if _settled(now):
                        final[key] = {name: res.structured_content for name, res in now.items()}
                return len(final) == 2

            await eventually(both_settled, timeout=90, what="both Warps settled")

            ids = {key: final[key]["warp_handle_get"]["agent_id"] for key in procs}
            instances = {final[key]["warp_handle_get"]["instance"] for key in procs}
            assert instances == {0, 1} and ids["a"] != ids["b"]
            assert base_agent_id(socket.gethostname(), project_dir) in ids.values()
            for key in procs:
                assert final[key]["warp_registry_get_info"]["agent_id"] == ids[key]
                assert final[key]["warp_registry_get_info"]["handle"] == f"early-{key}"
                assert final[key]["pattern_health"]["identity"]["agent_id"] == ids[key]
            for key, other in (("a", "b"), ("b", "a")):
                for result in seen[key]:
                    assert ids[other] not in _rendered(result), f"{key} answered with {other}'s id"


async def test_first_answer_after_start_waits_for_the_instance_lock(
    nats_server: EmbeddedNatsServer, project_id: str, project_dir: Path, tmp_path: Path
) -> None:
    """NATS is up: the first ``warp_handle_get`` of two fresh Warps waits for the lock and
    answers the process's own, final id (the wait is bounded by ``LOOM_WARP_READY_WAIT_S``,
    set high so the answer never depends on how fast the machine is)."""
    env = _folder_env(
        nats_server.url,
        project_id,
        project_dir,
        tmp_path / "home",
        LOOM_WARP_READY_WAIT_S="60",
        LOOM_AUTO_REGISTER="1",
    )
    async with (
        spawn_warp(env, tmp_path, name="a") as a,
        spawn_warp(env, tmp_path, name="b") as b,
    ):
        first: dict[str, dict[str, Any]] = {}

        async def ask(key: str, w: WarpProc) -> None:
            first[key] = await w.ok("warp_handle_get")

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "b", b)  # b has only just answered initialize
            tg.start_soon(ask, "a", a)
        assert all(info["agent_id"] is not None for info in first.values()), first
        assert {info["instance"] for info in first.values()} == {0, 1}
        assert first["a"]["agent_id"] != first["b"]["agent_id"]
        for key, w in (("a", a), ("b", b)):
            assert (await w.ok("warp_registry_get_info"))["agent_id"] == first[key]["agent_id"]
            assert (await w.ok("warp_handle_get"))["agent_id"] == first[key]["agent_id"]


_NONCES = """
import os, sys
from warp import instances
parent = instances.PROCESS_NONCE
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, instances.PROCESS_NONCE.encode())
    os._exit(0)
os.waitpid(pid, 0)
print(parent, os.read(read, 64).decode(), instances.PROCESS_NONCE)
"""


def test_a_forked_process_draws_its_own_nonce() -> None:
    """A Warp zygote imports warp.instances once and forks every Warp from it: two of them
    sharing the nonce would take one instance id in one folder."""
    done = subprocess.run([sys.executable, "-c", _NONCES], capture_output=True, text=True, timeout=60)
    parent, child, parent_after = done.stdout.split()
    assert child != parent == parent_after
    assert len(child) == 32
