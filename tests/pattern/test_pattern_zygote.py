"""``pattern --zygote``: Patterns forked from one pre-imported parent, each as the ``pattern``
that was started (its identity, its stdio, its exit status, its death); the mechanism is
``shared/zygote.py``, whose refusals tests/warp/test_zygote.py covers through Warp's."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pattern_helpers import eventually
from test_pattern_mcp import PATTERN, _init_params, base_env, call, pattern_session

from pattern.zygote import ZYGOTE_ENV
from shared.nats.server import EmbeddedNatsServer
from testsupport.env import without_fabric
from testsupport.processes import children, pid_alive
from testsupport.zygote import ZygoteProcess, own_zygote


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[ZygoteProcess]:
    """A Pattern zygote of this test's own (the suite's, if any, is left out of these tests)."""
    with own_zygote(tmp_path, "pattern") as started:
        yield started


def forked(env: dict[str, str], zygote: ZygoteProcess) -> dict[str, str]:
    return {**env, ZYGOTE_ENV: zygote.path}


async def test_two_patterns_forked_from_one_zygote_each_serve_their_own_agent(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path, zygote: ZygoteProcess
) -> None:
    one = forked(base_env(nats_server.url, project_id, project_path), zygote)
    two = forked(base_env(nats_server.url, project_id, project_path), zygote)
    async with (
        pattern_session(one, forked=False) as first,
        pattern_session(two, forked=False) as second,
    ):
        assert len(zygote.children) == 2  # each runs in a child; the started processes stand in
        a = await call(first, "pattern_health", {})
        b = await call(second, "pattern_health", {})
        assert (a["identity"]["agent_id"], b["identity"]["agent_id"]) == (
            one["LOOM_AGENT_ID"],
            two["LOOM_AGENT_ID"],
        )
        kept = (await call(first, "pattern_remember", {"content": "first's own"}))["memory"]["id"]
        seen = await call(second, "pattern_recall_context", {})
        assert kept not in {m["id"] for m in seen["memories"]}  # private to the first agent

    async def ended() -> bool:
        return not zygote.children

    await eventually(ended, timeout=20)


class Started:
    """A ``pattern`` process driven with raw JSON-RPC lines (its stdout must carry nothing else)."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.stderr = cwd / "pattern.stderr"
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [PATTERN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd
            )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the server closed stdout: {self.stderr.read_text()[-2000:]}"
            frame = json.loads(line)  # every line is a JSON-RPC frame
            if frame.get("id") == request.get("id"):
                return frame

    def initialize(self) -> None:
        answer = self.ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _init_params()})
        assert "result" in answer, answer


def test_a_forked_pattern_writes_only_frames_and_ends_with_its_input(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path, zygote: ZygoteProcess
) -> None:
    env = without_fabric() | forked(base_env(nats_server.url, project_id, project_path), zygote)
    started = Started(env, project_path)
    started.initialize()
    tools = started.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert len(tools["result"]["tools"]) == 18
    assert len(zygote.children) == 1 and not children(started.proc.pid)
    assert started.proc.stdin is not None and started.proc.stdout is not None
    started.proc.stdin.close()
    assert started.proc.stdout.read().strip() == b""
    assert started.proc.wait(timeout=30) == 0
    assert "loom.pattern" in started.stderr.read_text()  # the child's logs reach the started one's stderr


@pytest.mark.parametrize(
    ("sent", "status"),
    [(signal.SIGTERM, None), (signal.SIGKILL, -signal.SIGKILL)],
    ids=["sigterm", "sigkill"],
)
async def test_a_signal_to_the_started_pattern_ends_its_child(
    nats_server: EmbeddedNatsServer,
    project_id: str,
    project_path: Path,
    zygote: ZygoteProcess,
    sent: signal.Signals,
    status: int | None,
) -> None:
    """SIGTERM is passed on (Pattern stops as it would on its own, and its status is the
    child's); SIGKILL cannot be, and the child ends with its stand-in all the same."""
    env = without_fabric() | forked(base_env(nats_server.url, project_id, project_path), zygote)
    started = Started(env, project_path)
    started.initialize()
    (child,) = zygote.children
    started.proc.send_signal(sent)
    code = await asyncio.to_thread(started.proc.wait, 30)
    if status is not None:
        assert code == status
    else:  # as a Pattern of its own ends on SIGTERM, whichever way it reports it
        own = Started(without_fabric() | base_env(nats_server.url, project_id, project_path), project_path)
        own.initialize()
        own.proc.send_signal(sent)
        assert code == await asyncio.to_thread(own.proc.wait, 30)

    async def child_gone() -> bool:
        return not pid_alive(child)

    await eventually(child_gone, timeout=20)


def test_a_start_up_error_is_the_same_line_and_exit_code(tmp_path: Path, zygote: ZygoteProcess) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LOOM_PROJECT_ID": "Not A Valid Id!"}
    direct, through = (
        subprocess.run([PATTERN], env=e, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        for e in (env, forked(env, zygote))
    )
    assert direct.returncode == through.returncode == 2
    assert through.stderr == direct.stderr and through.stderr.startswith("pattern: ")
    assert through.stdout == direct.stdout == ""
    assert "child" in zygote.log.read_text()  # it was the zygote's child that refused


async def test_without_a_zygote_at_the_path_pattern_runs_on_its_own(
    nats_server: EmbeddedNatsServer, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    env = base_env(nats_server.url, project_id, project_path) | {ZYGOTE_ENV: str(tmp_path / "nobody.sock")}
    started = Started(without_fabric() | env, project_path)
    started.initialize()
    assert started.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]
    assert started.proc.stdin is not None
    started.proc.stdin.close()
    assert await asyncio.to_thread(started.proc.wait, 30) == 0
    said = "pattern: no zygote at LOOM_PATTERN_ZYGOTE took it (its log says why); starting on its own"
    assert said in started.stderr.read_text()
