"""Warp's MCP tools, one module per tool group; each module's ``tools(rt)`` builds its tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools import Tool

    from warp.runtime import WarpRuntime


def all_tools(rt: WarpRuntime) -> list[Tool]:
    from warp.tools import (
        channels,
        contexts,
        dlq,
        handle,
        leases,
        messages,
        questions,
        registry,
        review,
        work,
    )

    built: list[Tool] = []
    for module in (handle, channels, registry, messages, work, review, questions, leases, dlq, contexts):
        built.extend(module.tools(rt))
    return built
