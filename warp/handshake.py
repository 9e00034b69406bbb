"""Warp's answer to MCP ``initialize``, given before the MCP SDK has loaded.

An agent host starts Warp and waits for the handshake; importing the SDK and building
the tools takes most of a second, while the answer to ``initialize`` depends on nothing
but the constants below and the version the client asks for. So Warp's stdio transport
(:mod:`warp.stdio`) answers a well-formed ``initialize`` at once from here, and once the
SDK is up it hands the same request to the SDK (whose session then knows the client) and
drops the SDK's own answer. Anything unusual (another first message, unexpected
parameters) is left to the SDK. ``tests/warp/test_handshake.py`` holds this answer to the
SDK's, field for field, for every protocol version.

Standard library only: this module is imported before anything else.
"""

from __future__ import annotations

import json
from typing import Any, Final

from warp import __version__

NAME: Final = "warp"
TITLE: Final = "Loom Warp"

INSTRUCTIONS: Final = """\
Warp connects this agent to the other agents of the project (Loom fabric over NATS).
- Channels: warp_channels_list / _read / _send for project-wide notes (roadmap, parallel-work, errors).
- Registry: warp_registry_register once (capabilities, boundaries), then warp_registry_discover
  to find others.
- Direct messages: warp_messages_send_direct to an agent id from discover; warp_messages_read_direct
  returns what is waiting and marks it read.
- Work: warp_work_broadcast offers work; warp_work_claim takes the best item you are eligible for
  (with its context: what earlier attempts did); report with warp_work_progress, then
  warp_work_complete or warp_work_fail. Dead letters: warp_dlq_*.
- Context: warp_context_* keep shared trees of notes (a work item's tree has its id; append your
  notes under your attempt's node); reply_to on a channel or direct message starts a thread
  (warp_channels_thread, warp_messages_thread).
Errors name the argument at fault and the rule (a code is in the result's _meta["loom/error"]);
NATS outages are reported and retried automatically."""

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The protocol versions the SDK negotiates through ``initialize``; any other request gets
the newest (``mcp_types.version``: the test keeps the two lists equal)."""

CAPABILITIES: Final[dict[str, Any]] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
"""What the SDK's server declares for Warp (tools, and the empty prompts and resources)."""

_PARAMS: Final = frozenset({"protocolVersion", "capabilities", "clientInfo", "_meta"})


def initialize_request(line: bytes) -> tuple[int | str, str] | None:
    """The id and requested protocol version of ``line`` when it is a well-formed
    ``initialize`` request this module may answer; None for anything else."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if (
        not isinstance(message, dict)
        or message.get("jsonrpc") != "2.0"
        or message.get("method") != "initialize"
    ):
        return None
    request_id, params = message.get("id"), message.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str) or not isinstance(params, dict):
        return None
    version, capabilities, client = (params.get(k) for k in ("protocolVersion", "capabilities", "clientInfo"))
    well_formed = (
        set(params) <= _PARAMS
        and isinstance(version, str)
        and isinstance(capabilities, dict)
        and all(isinstance(v, dict) for v in capabilities.values())
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )
    return (request_id, version) if well_formed and isinstance(version, str) else None


def initialize_result(requested: str) -> dict[str, Any]:
    """The ``initialize`` result for a client asking for protocol version ``requested``."""
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": NAME, "title": TITLE, "version": __version__},
    }


def answer(request_id: int | str, requested: str) -> str:
    """The whole JSON-RPC response line to that ``initialize``."""
    response = {"jsonrpc": "2.0", "id": request_id, "result": initialize_result(requested)}
    return json.dumps(response, separators=(",", ":")) + "\n"
