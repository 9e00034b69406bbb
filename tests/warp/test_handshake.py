"""Warp answers ``initialize`` before the SDK has loaded (warp.handshake, warp.stdio): the
answer is the SDK's own, field for field, for every protocol version, and the session the
SDK then serves is the one the client started."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS
from warp_harness import WARP, make_identity

from shared.nats.server import EmbeddedNatsServer
from warp import handshake
from warp.runtime import WarpRuntime
from warp.server import build_server
from warp.settings import WarpSettings
from warp.stdio import Early, StdioPipes, serve_stdio

A = "a" * 32
ASKED = [*KNOWN_PROTOCOL_VERSIONS, "1999-01-01"]


def initialize(version: str, request_id: int | str = 1, **params: Any) -> bytes:
    body = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {**body, **params}}
    return (json.dumps(message) + "\n").encode()


class _Captured:
    """The writer side of the pipes: what Warp wrote, a frame a line."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.wrote = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.frames.extend(json.loads(line) for line in data.decode().splitlines() if line.strip())
        self.wrote.set()

    async def drain(self) -> None:
        return None


async def _served(
    nats_url: str, tmp_path: Path, lines: list[bytes], early: Early, answers: int
) -> list[dict[str, Any]]:
    """Warp's real server on in-memory pipes fed ``lines``; the input ends once it has
    written ``answers`` frames (at the end of input the SDK drops what is in flight)."""
    rt = WarpRuntime(make_identity("t-handshake", tmp_path, A), WarpSettings(), nats_url=nats_url)
    reader = asyncio.StreamReader()
    for line in lines:
        reader.feed_data(line)
    out = _Captured()
    serving = asyncio.create_task(serve_stdio(build_server(rt), StdioPipes(reader, out), early))  # type: ignore[arg-type]
    async with asyncio.timeout(30):
        while len(out.frames) < answers:
            out.wrote.clear()
            await out.wrote.wait()
    reader.feed_eof()
    await serving
    return out.frames


def test_the_versions_are_the_sdks() -> None:
    assert handshake.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize("version", ASKED)
async def test_the_early_answer_is_the_sdks(
    version: str, nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    line = initialize(version, request_id="x-7")
    sdk = await _served(nats_server.url, tmp_path, [line], Early(), answers=1)
    assert sdk == [json.loads(handshake.answer("x-7", version))]
    assert handshake.initialize_request(line) == ("x-7", version)


async def test_the_sdks_answer_to_an_initialize_answered_early_is_left_out(
    nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    line = initialize("2025-06-18", request_id=4)
    initialized = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
    listing = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}\n'
    frames = await _served(nats_server.url, tmp_path, [initialized, listing], Early(line, 4), answers=1)
    assert [f.get("id") for f in frames] == [5]  # the SDK knew the session: tools/list was served
    assert "warp_work_claim" in {t["name"] for t in frames[0]["result"]["tools"]}


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b'{"jsonrpc": "2.0", "method": "initialize", "params": {}}\n',  # a notification
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n',
        b'{"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": {}}\n',
        initialize("2025-06-18", request_id=True),  # type: ignore[arg-type]
        initialize("2025-06-18").replace(b'"protocolVersion": "2025-06-18"', b'"protocolVersion": 3'),
        initialize("2025-06-18", unexpected=1),
        initialize("2025-06-18", capabilities={"sampling": True}),
        initialize("2025-06-18", clientInfo={"name": "t"}),
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n',
    ],
)
def test_anything_unusual_is_left_to_the_sdk(line: bytes) -> None:
    assert handshake.initialize_request(line) is None


def test_a_warp_process_answers_once_and_serves_the_session(warp_env: dict[str, str]) -> None:
    """Over real pipes: one answer to ``initialize`` (the early one), then the SDK's session."""
    env = {**os.environ, **warp_env}
    with subprocess.Popen(
        [WARP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(initialize("2025-11-25", request_id=1))
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        assert first == json.loads(handshake.answer(1, "2025-11-25"))
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}\n')
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}\n')
        proc.stdin.flush()
        later = [json.loads(proc.stdout.readline()) for _ in range(2)]
        proc.stdin.close()
        assert [f.get("id") for f in later] == [2, 3]
        assert len(later[0]["result"]["tools"]) > 20
        assert proc.wait(30) == 0
        assert proc.stdout.read() == b""  # nothing more, above all no second answer to id 1
