"""``warp --zygote``: Warps forked from one pre-imported parent, each as the ``warp`` that
was started (its settings, its stdio, its exit status, its death), and the refusals that
make a started ``warp`` run on its own instead."""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient
from warp_harness import WARP, eventually, spawn_warp, stdout_frames_only

from shared.agents.local import NOTES_DIR, read_note
from shared.agents.registry import Registry
from shared.models import AgentStatus
from shared.names import ProjectNames
from shared.zygote import HEADER, namespaces
from testsupport.env import without_fabric
from testsupport.processes import children, holding_pipes, pid_alive
from testsupport.zygote import ZygoteProcess, own_zygote
from warp.zygote import ZYGOTE_ENV


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[ZygoteProcess]:
    """A zygote of this test's own (the suite's, if any, is left out of these tests)."""
    with own_zygote(tmp_path, "warp") as started:
        yield started


def forked(warp_env: dict[str, str], zygote: ZygoteProcess, **extra: str) -> dict[str, str]:
    agent = {"LOOM_AGENT_ID": uuid.uuid4().hex, "LOOM_AUTO_REGISTER": "1"}
    return {**warp_env, ZYGOTE_ENV: zygote.path, **agent, **extra}


def gone(pid: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not pid_alive(pid)

    return check


def no_children(zygote: ZygoteProcess) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not zygote.children

    return check


def our_pipes() -> set[int]:
    """The inodes of the pipes this process holds an end of."""
    found = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd).startswith("pipe:"):
                found.add(os.stat(fd).st_ino)
    return found


async def test_two_warps_forked_from_one_zygote_each_serve_their_own_agent(
    warp_env: dict[str, str], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    one, two = forked(warp_env, zygote), forked(warp_env, zygote, LOOM_HANDLE="second")
    async with spawn_warp(one, tmp_path) as first, spawn_warp(two, tmp_path) as second:
        a = await first.ready_ok("warp_registry_get_info")
        b = await second.ready_ok("warp_registry_get_info")
        assert (a["agent_id"], b["agent_id"]) == (
            one["LOOM_AGENT_ID"],
            two["LOOM_AGENT_ID"],
        )
        assert b["handle"] == "second"
        # Each Warp runs in a child of the zygote; the started processes only stand in.
        assert len(zygote.children) == 2
        assert not children(first.pid) and not children(second.pid)
        # ...holding the pipes this process started them on: how a bench finds a forked Warp
        holders = holding_pipes(our_pipes())
        assert zygote.children <= holders and not {first.pid, second.pid} & holders
    stdout_frames_only(first.stdout_lines)
    stdout_frames_only(second.stdout_lines)
    assert first.proc.returncode == 0 and second.proc.returncode == 0
    await eventually(no_children(zygote), what="the children ended with their sessions")


async def test_a_signal_to_the_started_warp_reaches_its_child(
    warp_env: dict[str, str], zygote: ZygoteProcess, tmp_path: Path, nc: NatsClient
) -> None:
    env = forked(warp_env, zygote)
    async with spawn_warp(env, tmp_path) as w:
        await w.ready_ok("warp_registry_get_info")
        (child,) = zygote.children
        w.signal(signal.SIGTERM)  # Warp's own handling: offline, then exit
        code = await w.wait_exit()
    registry = Registry(nc.jetstream(), ProjectNames(env["LOOM_PROJECT_ID"]))
    assert (await registry.get(env["LOOM_AGENT_ID"])).status is AgentStatus.OFFLINE
    assert code == 0 and not pid_alive(child)


async def test_killing_the_started_warp_kills_its_child(
    warp_env: dict[str, str], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    async with spawn_warp(forked(warp_env, zygote), tmp_path) as w:
        await w.ready_ok("warp_registry_get_info")
        (child,) = zygote.children
        w.kill9()
        assert await w.wait_exit() == -signal.SIGKILL
        await eventually(gone(child), what="the child ended with its stand-in")


async def test_a_child_killed_is_a_started_warp_killed(
    warp_env: dict[str, str], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """Whoever kills the Warp itself (the registry's host and pid, a person with ``kill``)
    sees its starter learn of it as of any Warp's death."""
    async with spawn_warp(forked(warp_env, zygote), tmp_path) as w:
        await w.ready_ok("warp_registry_get_info")
        (child,) = zygote.children
        os.kill(child, signal.SIGKILL)
        assert await w.wait_exit() == -signal.SIGKILL


def test_a_start_up_error_is_the_same_line_and_exit_code(
    warp_env: dict[str, str], zygote: ZygoteProcess
) -> None:
    env = without_fabric()
    env |= {**warp_env, "LOOM_PROJECT_ID": "Not A Valid Id!"}
    env.pop(ZYGOTE_ENV, None)  # on its own: not the suite's zygote either
    direct = subprocess.run(
        [WARP], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    through = subprocess.run(
        [WARP],
        env={**env, ZYGOTE_ENV: zygote.path},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert direct.returncode == through.returncode == 2
    assert through.stderr == direct.stderr and through.stderr.startswith("warp: ")
    assert through.stdout == direct.stdout == ""


async def test_without_a_zygote_at_the_path_warp_runs_on_its_own(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**warp_env, ZYGOTE_ENV: str(tmp_path / "nobody.sock"), "LOOM_AGENT_ID": uuid.uuid4().hex}
    env["LOOM_AUTO_REGISTER"] = "1"
    async with spawn_warp(env, tmp_path) as w:
        info = await w.ready_ok("warp_registry_get_info")
        assert info["agent_id"] == env["LOOM_AGENT_ID"]
        assert "no zygote at LOOM_WARP_ZYGOTE took it (its log says why); starting on its own" in w.stderr()


def _request(zygote: ZygoteProcess, body: bytes, fds: list[int] | None) -> bytes:
    """Send a raw request; what the zygote answers before it closes the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(zygote.path)
        ancillary = [] if fds is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        conn.sendmsg([HEADER.pack(len(body)), body], ancillary)
        conn.settimeout(30)
        answer = b""
        try:
            while chunk := conn.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass  # closed with the rest of the request unread
        return answer


async def test_a_forked_warp_notes_itself_under_the_process_that_started_it(
    warp_env: dict[str, str], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """The hooks of an agent host find their Warp by the host's process id (docs/hosts.md):
    a forked Warp's parent is the zygote, so it takes its stand-in's parent as its host."""
    env = forked(warp_env, zygote)
    async with spawn_warp(env, tmp_path) as w:
        await w.ready_ok("warp_registry_get_info")
        (child,) = zygote.children
        notes = Path(env["LOOM_PROJECT_PATH"]) / NOTES_DIR
        found = read_note(notes / f"{os.getpid()}.json")  # this process started the ``warp``
        assert found is not None and (found.agent_id, found.pid) == (env["LOOM_AGENT_ID"], child)
        assert not (notes / f"{zygote.proc.pid}.json").exists()


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("other namespaces", "started in other namespaces than the zygote's"),
        ("websocket", "a WebSocket NATS URL needs the transport the zygote left out"),
        ("no descriptors", "a request carries a length and the three standard descriptors"),
        ("not a request", "a request names argv, env, cwd, namespaces and host"),
        ("host not a pid", "a request's host is a process id"),
        ("ignored not signals", "a request's ignored signals are a list of signal numbers"),
        ("not json", "JSONDecodeError"),
    ],
)
def test_a_request_it_cannot_act_on_is_refused_and_nothing_is_started(
    zygote: ZygoteProcess, tmp_path: Path, case: str, said: str
) -> None:
    """The started ``warp`` sees the connection close without a child: it runs on its own
    (a ``warp`` launched in a network namespace or container of its own, say)."""
    place: dict[str, Any] = {
        "argv": ["warp"],
        "env": {},
        "cwd": str(tmp_path),
        "namespaces": namespaces(),
        "host": os.getpid(),
    }
    if case == "host not a pid":
        place["host"] = "1"
    if case == "ignored not signals":
        place["ignored"] = ["SIGINT"]
    if case == "other namespaces":
        place["namespaces"] = {**namespaces(), "net": "net:[1]"}
    if case == "websocket":
        place["env"] = {"NATS_URL": "wss://nats.example:443"}
    body = {"not a request": b'["warp"]', "not json": b"{"}.get(case, json.dumps(place).encode())
    with open(os.devnull, "rb") as null:
        fds = None if case == "no descriptors" else [null.fileno()] * 3
        assert _request(zygote, body, fds) == b""
    assert not zygote.children
    assert said in zygote.log.read_text()


def test_the_zygote_stops_on_sigterm_and_removes_its_socket(zygote: ZygoteProcess) -> None:
    zygote.proc.send_signal(signal.SIGTERM)
    assert zygote.proc.wait(30) == 0
    assert not os.path.exists(zygote.path)


# A SIGTERM sent the moment the socket is bound: before the fix, the handlers were installed
# after binding, and a signal in that window killed the zygote (exit -15, socket left).
_SIGTERM_AT_BIND = """
import os, signal, sys
def hook(event, args):
    if event == "socket.bind":
        os.kill(os.getpid(), signal.SIGTERM)
sys.addaudithook(hook)
from warp.cli import main
sys.exit(main(["--zygote", sys.argv[1]]))
"""


def test_a_sigterm_as_the_socket_is_bound_is_a_clean_stop(tmp_path: Path) -> None:
    path = str(tmp_path / "z.sock")
    done = subprocess.run(
        [sys.executable, "-c", _SIGTERM_AT_BIND, path],
        env=without_fabric(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert not os.path.exists(path)


async def test_a_killed_stand_in_whose_host_then_closes_stdin_still_kills_its_child(
    warp_env: dict[str, str], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """A host that kills its Warp closes the Warp's stdin once it has reaped it. The child
    sees both ends: the stand-in's connection first (the kernel closes it as the stand-in
    dies), then its input. However they reach it (here both wait while the child is
    stopped), it dies as killed: it must not deregister as a Warp whose session ended."""
    async with spawn_warp(forked(warp_env, zygote), tmp_path) as w:
        await w.ready_ok("warp_registry_register")
        (child,) = zygote.children
        os.kill(child, signal.SIGSTOP)
        try:
            w.kill9()
            assert await w.wait_exit() == -signal.SIGKILL
            assert w.proc.stdin is not None
            await w.proc.stdin.aclose()
        finally:
            os.kill(child, signal.SIGCONT)
        await eventually(reaped(zygote, child), what="the zygote reaped the child")
    assert f"child {child} ended (-9)" in zygote.log.read_text()


def reaped(zygote: ZygoteProcess, child: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return f"child {child} ended (" in zygote.log.read_text()

    return check


_ORPHANED = """
import asyncio, socket, sys
from pathlib import Path
from shared import zygote
from shared.identity import Identity
from warp import server
from warp.runtime import WarpRuntime
from warp.settings import WarpSettings
child_end, stand_in_end = socket.socketpair()
server.SESSION_ENDED.append(lambda: zygote.die_if_stand_in_gone(child_end))
if sys.argv[1] == "dead":
    stand_in_end.close()
identity = Identity(
    project_id="orphan", project_path=Path(sys.argv[2]), agent_id="a" * 32, base_agent_id="a" * 32,
    hostname="host", handle="orphan", agent_type="generic", user_id="b" * 16,
)
mcp = server.build_server(WarpRuntime(identity, WarpSettings(), nats_url="nats://127.0.0.1:1"))
async def main():
    async with mcp.settings.lifespan(mcp):
        pass
asyncio.run(main())
print("ended as sessions end")
"""


@pytest.mark.parametrize(("stand_in", "code"), [("alive", 0), ("dead", -signal.SIGKILL)])
def test_at_the_end_of_its_session_a_child_whose_stand_in_is_gone_dies_killed(
    stand_in: str, code: int, tmp_path: Path
) -> None:
    """The session's end, seen before the lifeline thread ran: the stand-in's closed end
    decides (deterministic, unlike the races above and below). The server's lifespan is
    where every session's end passes, on Warp's pipes, the SDK's transport or HTTP."""
    done = subprocess.run(
        [sys.executable, "-c", _ORPHANED, stand_in, str(tmp_path)],
        env=without_fabric(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == code, done.stderr[-2000:]
    assert ("ended as sessions end" in done.stdout) is (stand_in == "alive")


async def test_a_killed_stand_in_kills_its_child_on_the_sdks_own_transport_too(
    warp_env: dict[str, str], zygote: ZygoteProcess, nc: NatsClient, tmp_path: Path
) -> None:
    """With stdout not a pipe, Warp serves through the SDK's own stdio transport, which has
    no end-of-input hook. A host that kills the stand-in then closes its stdin
    (asyncio does so at once when it sees the process gone): the child still dies as
    killed, and its registry entry stays online (lost, not stopped)."""
    env = without_fabric(also=(ZYGOTE_ENV,)) | forked(warp_env, zygote)
    log = tmp_path / "warp.stderr"
    with log.open("wb") as errors:
        proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child; starting it does not block
            [WARP], env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors
        )
    registry = Registry(nc.jetstream(), ProjectNames(env["LOOM_PROJECT_ID"]))

    async def registered() -> bool:
        try:
            return (await registry.get(env["LOOM_AGENT_ID"])).status is AgentStatus.ONLINE
        except Exception:
            return False

    try:
        await eventually(registered, what="the forked Warp registered")
        assert "using the SDK's transport" in log.read_text()
        (child,) = zygote.children
        os.kill(child, signal.SIGSTOP)  # both ends reach it together: the stand-in's and its input's
        try:
            proc.kill()
            assert proc.wait(30) == -signal.SIGKILL
            assert proc.stdin is not None
            proc.stdin.close()
        finally:
            os.kill(child, signal.SIGCONT)
        await eventually(reaped(zygote, child), what="the zygote reaped the child")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"child {child} ended (-9)" in zygote.log.read_text()
    assert (await registry.get(env["LOOM_AGENT_ID"])).status is AgentStatus.ONLINE
    assert "MCP session ended" not in log.read_text()
