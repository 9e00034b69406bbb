"""The ``weft`` console script, and Wefts forked from one pre-imported parent (docs/weft.md,
"Many Wefts on one machine").

``weft serve`` spends about two seconds of CPU importing FastAPI, uvicorn, nats-py and its
own routes before it opens NATS. A caller that starts many Wefts (the test suite starts
about seventy) can start ``weft --zygote SOCKET`` once and run each ``weft`` with
``LOOM_WEFT_ZYGOTE=SOCKET``: it hands its stdio, arguments, environment and working
directory to that parent, which forks a child that runs the command exactly as the started
process would have; the started process stands in for it (signals passed on, the child's
exit status its own, the child ended when it is killed). The mechanism is
:mod:`shared.zygote`, the same as Warp's, Pattern's and Shuttle's. No zygote answering: the
command runs in its own process as always.

Only the standard library (and :mod:`shared.zygote`, which is the same) is imported before
the hand-off, so a stand-in costs little to start.
"""

from __future__ import annotations

from shared.zygote import Program, console_main

ZYGOTE_ENV = "LOOM_WEFT_ZYGOTE"


def _preload() -> None:
    """What ``weft serve`` imports before it answers: its CLI, the app and every route,
    uvicorn's server parts and the NATS runtime. Nothing that holds per-process state: the
    settings, the NATS connection and the app are made when a command runs."""
    from shared.footprint import leave_out_unused_imports

    # aiohttp too (a child whose NATS is ws:// runs on its own); rich stays: Typer prints with it
    leave_out_unused_imports(None, mcp_server=False)
    import uvicorn.lifespan.on
    import uvicorn.loops.auto
    import uvicorn.protocols.http.auto
    import uvicorn.protocols.websockets.auto  # noqa: F401
    import uvloop  # noqa: F401

    import shared.nats.client
    import shared.nats.server
    import shared.work.policy  # noqa: F401
    import weft.app
    import weft.cli
    import weft.runtime  # noqa: F401
    from shared.loop import keep_startup_heap

    keep_startup_heap()  # frozen before forking: no child's collector walks (and copies) it


def _run_here() -> None:
    from weft.cli import main

    main()


PROGRAM = Program("weft", ZYGOTE_ENV, _preload)


def main() -> int:
    """Console-script entry point: ``weft --zygote SOCKET`` serves as the zygote; any other
    ``weft`` is forked from the one ``LOOM_WEFT_ZYGOTE`` names, else runs here."""
    return console_main(PROGRAM, _run_here)
