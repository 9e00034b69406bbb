"""Patterns forked from one pre-imported parent (docs/pattern.md, "Many agents on one machine").

``pattern --zygote SOCKET`` imports what a Pattern imports once and forks a child for every
``pattern`` started with ``LOOM_PATTERN_ZYGOTE=SOCKET``; the mechanism (the hand-off, the
stand-in, the lifeline) is :mod:`shared.zygote`, the same as Warp's.

Only the standard library is imported here at module level: ``pattern.cli`` imports this
module in every started ``pattern``, the stand-ins included.
"""

from __future__ import annotations

from shared.zygote import Program

ZYGOTE_ENV = "LOOM_PATTERN_ZYGOTE"


def _preload() -> None:
    """What a stdio Pattern imports before it answers and once connected, and its tools'
    schemas, so that each child starts with them in place. Only modules that hold no
    per-process state."""
    from shared.footprint import leave_out_unused_imports

    leave_out_unused_imports(None)  # aiohttp too: a child whose NATS is ws:// runs on its own
    import mcp.server.mcpserver  # noqa: F401
    import uvloop  # noqa: F401

    import pattern.config
    import pattern.runtime
    import pattern.server  # noqa: F401
    import shared.identity
    import shared.legacy
    import shared.loop
    import shared.nats.auth
    import shared.redact
    import shared.settings
    import shared.trace.tracing  # noqa: F401
    from pattern.tools import TOOLS
    from shared.loop import keep_startup_heap
    from shared.mcp.tools import prepare

    prepare(TOOLS)  # every tool's schema and validator, built once for all the children
    keep_startup_heap()  # frozen before forking: no child's collector touches (and copies) it


PROGRAM = Program("pattern", ZYGOTE_ENV, _preload)
