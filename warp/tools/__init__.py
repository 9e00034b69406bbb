"""Warp's MCP tools, one module per tool group.

Each tool is a module-level function whose first parameter is the
:class:`~warp.runtime.WarpRuntime` (a test imports and calls it alone); each module
lists its tools in ``TOOLS``, and :func:`all_tools` builds them for the server with
the builder Pattern uses too (:mod:`shared.mcp.tools`), bound to one runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools import Tool

    from shared.mcp.tools import ToolSpec
    from warp.runtime import WarpRuntime


def specs() -> list[ToolSpec]:
    """Every Warp tool, in the order ``tools/list`` shows them."""
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

    modules = (handle, channels, registry, messages, work, review, questions, leases, dlq, contexts)
    return [spec for module in modules for spec in module.TOOLS]


def all_tools(rt: WarpRuntime) -> list[Tool]:
    """The server's tools, each called with ``rt``."""
    from shared.mcp.tools import build_tools
    from warp.tools.base import WarpHost

    return build_tools(specs(), rt, WarpHost(rt))
