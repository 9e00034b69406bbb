"""The ``shuttle`` console script, and Shuttle commands forked from one pre-imported parent
(docs/shuttle.md, "Many commands in a row").

A command spends most of its CPU importing Typer, rich and httpx (about 0.3 s on the
two-core machine), for a request that takes a few milliseconds. A caller that runs hundreds
of commands (a script over the fleet, the test suite's scenarios) can start
``shuttle --zygote SOCKET`` once and run each ``shuttle`` with ``LOOM_SHUTTLE_ZYGOTE=SOCKET``:
it hands its stdio, arguments, environment and working directory to that parent, which
forks a child that runs the command exactly as the started process would have; the started
process stands in for it (signals passed on, the child's exit status its own). The mechanism
is :mod:`shared.zygote`, the same as Warp's and Pattern's. No zygote answering: the command
runs in its own process as always.

Only the standard library (and :mod:`shared.zygote`, which is the same) is imported before
the hand-off, so a stand-in costs little to start.
"""

from __future__ import annotations

import socket
from typing import Any

from shared.zygote import Program, console_main

ZYGOTE_ENV = "LOOM_SHUTTLE_ZYGOTE"


def _preload() -> None:
    """Every command's module and what they use to reach Weft and print, so that a child
    starts with all of it in place. Nothing that holds per-process state: the console and
    the settings are made when a command runs (``shuttle.output``, ``shuttle.app``)."""
    import importlib

    import httpx  # noqa: F401
    import rich.console
    import rich.table  # noqa: F401

    import loom.transport  # noqa: F401
    from shared.loop import keep_startup_heap
    from shuttle.cli import COMMANDS

    for module in sorted(set(COMMANDS.values())):
        importlib.import_module(f"shuttle.commands.{module}")
    keep_startup_heap()  # frozen before forking: no child's collector walks (and copies) it


def _run_here() -> None:
    from shuttle.cli import main

    main()


def _in_child(_conn: socket.socket, request: dict[str, Any]) -> None:
    """The shell a command was typed in is found by walking up from its process (Typer's
    ``--install-completion``, through shellingham): a child's parents are the zygote's, so
    the walk starts at its stand-in instead, whose parents are the command's own."""
    import functools

    import shellingham  # type: ignore[import-untyped]

    shellingham.detect_shell = functools.partial(shellingham.detect_shell, pid=request["stand_in"])


PROGRAM = Program("shuttle", ZYGOTE_ENV, _preload, _in_child)


def main() -> int:
    """Console-script entry point: ``shuttle --zygote SOCKET`` serves as the zygote; any
    other ``shuttle`` is forked from the one ``LOOM_SHUTTLE_ZYGOTE`` names, else runs here."""
    return console_main(PROGRAM, _run_here)
