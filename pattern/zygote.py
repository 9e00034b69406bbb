"""Patterns forked from one pre-imported parent (docs/pattern.md, "Many agents on one machine").

``pattern --zygote SOCKET`` imports what a Pattern imports once and forks a child for every
``pattern`` started with ``LOOM_PATTERN_ZYGOTE=SOCKET``; the mechanism (the hand-off, the
stand-in, the lifeline) and what every agent's server imports are :mod:`shared.zygote`, the
same as Warp's.

Only the standard library is imported here at module level: ``pattern.cli`` imports this
module in every started ``pattern``, the stand-ins included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.zygote import Program, agent_server_preload

if TYPE_CHECKING:
    from shared.mcp.tools import ToolSpec

ZYGOTE_ENV = "LOOM_PATTERN_ZYGOTE"


def _preload() -> tuple[ToolSpec, ...]:
    """Pattern's own modules, imported before it answers and once connected, and its tools
    (the rest: :func:`shared.zygote.agent_server_preload`). Only modules that hold no
    per-process state."""
    import pattern.config
    import pattern.runtime
    import pattern.server  # noqa: F401
    from pattern.tools import TOOLS

    return TOOLS


PROGRAM = Program("pattern", ZYGOTE_ENV, agent_server_preload(_preload))
