"""What an agent's process leaves out of its imports (shared/footprint.py): only optional
modules it cannot use, only before the libraries that import them are loaded, and the
libraries then run without them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shared.footprint import leave_out_unused_imports, unused_optionals


@pytest.mark.parametrize(
    ("url", "left_out"),
    [
        (None, ["aiohttp", "rich"]),
        ("nats://127.0.0.1:4222", ["aiohttp", "rich"]),
        ("tls://a:4222, nats://b:4222", ["aiohttp", "rich"]),
        ("ws://127.0.0.1:8080", ["rich"]),
        ("nats://a:4222,WSS://b:443", ["rich"]),
    ],
)
def test_the_websocket_transport_is_kept_only_for_websocket_servers(
    url: str | None, left_out: list[str]
) -> None:
    assert unused_optionals(url) == left_out


def test_a_process_that_is_no_mcp_server_keeps_rich() -> None:
    """Weft is no MCP server, and Typer prints its errors with rich."""
    assert unused_optionals("nats://127.0.0.1:4222", mcp_server=False) == ["aiohttp"]
    assert unused_optionals("ws://127.0.0.1:8080", mcp_server=False) == []


PROBE = """
import json, sys
from shared.footprint import leave_out_unused_imports
left = leave_out_unused_imports(sys.argv[1])
import nats.aio.transport as transport
import mcp.server.mcpserver
from mcp.server.mcpserver.utilities.logging import configure_logging
configure_logging("INFO")  # the SDK's own fallback when rich is absent
print(json.dumps({
    "left": left,
    "aiohttp": transport.aiohttp is not None,
    "rich": sys.modules.get("rich") is not None,
}))
"""


def _probe(url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_a_fresh_process_runs_nats_and_the_mcp_sdk_without_them() -> None:
    assert _probe("nats://127.0.0.1:4222") == {"left": ["aiohttp", "rich"], "aiohttp": False, "rich": False}


def test_a_process_that_reaches_nats_over_websocket_keeps_its_transport() -> None:
    assert _probe("ws://127.0.0.1:8080") == {"left": ["rich"], "aiohttp": True, "rich": False}


def test_nothing_changes_in_a_process_that_has_loaded_them_already() -> None:
    import nats  # noqa: F401  (as every test process has)

    before = dict(sys.modules)
    assert leave_out_unused_imports("nats://127.0.0.1:4222") == []
    assert sys.modules == before
