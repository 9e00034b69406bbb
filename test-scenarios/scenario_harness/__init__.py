"""Harness for Loom's multi-agent scenarios: real nats-server, Weft, Warp, Pattern and Shuttle.

See ``test-scenarios/README.md`` for how to write a scenario with it.
"""

from scenario_harness.agents import (
    Connection,
    PatternSession,
    WarpAgent,
    new_agent_id,
    new_user_id,
    pattern_session,
    warp_agent,
)
from scenario_harness.fabric import Fabric, agents_in, drain, eventually, new_project_id
from scenario_harness.mcp_process import McpProcess, ToolCallError, text_of
from scenario_harness.shuttle_cli import ProcessResult, ShuttleResult, run_command, run_shuttle
from scenario_harness.weft_server import RunningWeft, managed_spinup, run_weft

__all__ = [
    "Connection",
    "Fabric",
    "McpProcess",
    "PatternSession",
    "ProcessResult",
    "RunningWeft",
    "ShuttleResult",
    "ToolCallError",
    "WarpAgent",
    "agents_in",
    "drain",
    "eventually",
    "managed_spinup",
    "new_agent_id",
    "new_project_id",
    "new_user_id",
    "pattern_session",
    "run_command",
    "run_shuttle",
    "run_weft",
    "text_of",
    "warp_agent",
]
