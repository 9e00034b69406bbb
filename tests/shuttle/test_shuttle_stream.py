"""The WebSocket follower's error paths, against a real Weft."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from shuttle_helpers import Cli
from weft_runner import running_weft

from loom.events import EventStream
from loom.transport import WeftClient
from shared.nats.server import EmbeddedNatsServer
from shuttle.config import resolve
from shuttle.errors import Refused


def client(cli: Cli, **env: str) -> WeftClient:
    return WeftClient(resolve({}, env={**cli.env, **env}))


def test_a_subscription_weft_refuses_is_refused_with_its_message(cli: Cli) -> None:
    with pytest.raises(Refused) as err:
        EventStream(client(cli), ["work"], {"colour": "red"}).open()
    assert err.value.status == 400 and "colour: not a filter of the requested topics" in err.value.message


def test_an_error_frame_from_weft_is_refused(cli: Cli) -> None:
    with EventStream(client(cli), ["work"]) as stream:
        assert stream.welcome["project_id"] == cli.project
        assert stream._ws is not None
        stream._ws.send("not json")
        with pytest.raises(Refused, match="Weft refused the event stream: message: not JSON"):
            next(stream.frames(timeout=10))


def test_weft_pings_are_answered_and_the_stream_stays_up(cli: Cli) -> None:
    """Weft pings every second here; three quiet ticks later the stream still works."""
    with EventStream(client(cli), ["work"]) as stream:
        frames = stream.frames(timeout=1.0)
        assert [next(frames) for _ in range(3)] == [None, None, None]
        cli.json("submit", "after the pings", "-c", "code")
        frame: Any = None
        while frame is None:
            frame = next(frames)
        assert frame["type"] == "event" and frame["event"]["kind"] == "work"


async def test_weft_going_away_mid_watch_is_exit_3(nats_server: EmbeddedNatsServer, cli: Cli) -> None:
    with running_weft(nats_server.url) as weft:
        work_id = cli.json("--api-url", weft.url, "submit", "orphan", "-c", "code")["id"]
        proc = cli.popen("watch", work_id, env={"LOOM_API_URL": weft.url})
        assert proc.stdout is not None
        heading = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert heading.startswith(f"{work_id}  ") and "orphan" in heading
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert "queued" in line
    # Weft has stopped: the stream ends (or the next re-read fails) -> exit 3 naming Weft's URL
    _, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 3, stderr
    assert stderr.startswith("shuttle: error: ") and weft.url in stderr and stderr.count("\n") == 1
