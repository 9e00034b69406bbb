"""How a watch names what it read again (loom/events.py): a record found final is the change
that ended it, so a skipped event still shows as ``work.completed`` with its result."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from loom.errors import Unreachable
from loom.events import HANDSHAKE_ATTEMPTS, EventStream, recheck_kind
from loom.transport import Connection, WeftClient
from shared.models import FINAL_WORK_STATES


def test_a_final_record_read_again_is_named_by_its_status_and_anything_else_is_a_recheck() -> None:
    final = {str(s) for s in FINAL_WORK_STATES}
    assert recheck_kind({"status": "completed"}, final) == "work.completed"
    assert recheck_kind({"status": "dead-lettered"}, final) == "work.dead-lettered"
    assert recheck_kind({"status": "in-progress"}, final) == "recheck"
    assert recheck_kind({}, final) == "recheck"


def test_a_handshake_that_times_out_is_tried_once_more_then_weft_is_unreachable() -> None:
    """A Weft that takes the connection but answers nothing (busy): the WebSocket handshake
    is tried twice, then the watch says Weft cannot be reached, naming the WebSocket."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    port = listener.getsockname()[1]
    taken: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            for _ in range(HANDSHAKE_ATTEMPTS + 1):
                taken.append(listener.accept()[0])  # and never answer

    silent = threading.Thread(target=accept, daemon=True)
    silent.start()
    client = WeftClient(Connection(f"http://127.0.0.1:{port}", timeout=0.5))
    try:
        with pytest.raises(Unreachable) as refused, EventStream(client, ["work"]):
            pass
        for _ in range(250):  # the second connection may still wait in the accept queue
            if len(taken) >= HANDSHAKE_ATTEMPTS:
                break
            time.sleep(0.02)
    finally:
        listener.close()
        for connection in taken:
            connection.close()
        client.close()
    assert len(taken) == HANDSHAKE_ATTEMPTS == 2
    assert "WebSocket ws://127.0.0.1" in refused.value.message
