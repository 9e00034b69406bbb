"""``warp``: run the Warp MCP server (stdio by default, ``--http`` for streamable HTTP).

Start-up errors (a bad identity or setting, or a setting of the TypeScript
Warp that cannot be honoured) are one line on stderr and exit code 2; stdout
carries nothing but MCP frames. Imports are kept lazy so the process answers
``initialize`` quickly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

    from warp.runtime import WarpRuntime
    from warp.services import Services
    from warp.settings import WarpSettings

SIGNAL_GRACE_S = 2.0
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    from warp import __version__

    p = argparse.ArgumentParser(
        prog="warp",
        description="Loom Warp: per-agent MCP server (channels, registry, direct messages, work, DLQ).",
        epilog="Configuration comes from the environment: NATS_URL, LOOM_PROJECT_ID, LOOM_AGENT_ID, "
        "LOOM_HANDLE, LOOM_AGENT_TYPE, LOOM_CAPABILITIES, LOOM_BOUNDARIES, LOOM_HEARTBEAT_S, "
        "LOOM_AUTO_REGISTER, ... (see docs/warp.md).",
    )
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    p.add_argument("--with-memory", action="store_true", help="also serve Pattern's memory tools")
    p.add_argument(
        "--zygote",
        metavar="SOCKET",
        help="import once and fork every warp started with LOOM_WARP_ZYGOTE=SOCKET (docs/warp.md)",
    )
    p.add_argument("--version", action="version", version=f"warp {__version__}")
    return p


def _fail(message: str) -> int:
    print(f"warp: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    # Tool errors go to agents: the rule and the field, not a link to pydantic's docs.
    os.environ.setdefault("PYDANTIC_ERRORS_INCLUDE_URL", "0")
    args = _parser().parse_args(argv)
    if not 1 <= args.port <= 65535:
        return _fail("--port: must be between 1 and 65535")
    from shared.zygote import start
    from warp.zygote import PROGRAM

    forked = start(PROGRAM, args.zygote, argv, main)  # serve as the zygote, or stand in for a child
    if forked is not None:
        return forked

    from pydantic import ValidationError

    from shared.errors import describe_validation
    from shared.footprint import leave_out_unused_imports
    from shared.identity import IdentityError, bound_to_credential, load_settings, resolve_identity
    from shared.legacy import LegacySettingError, apply_environment, check_warp_files
    from shared.names import InvalidNameError
    from shared.nats.auth import CredentialsError, agent_credential
    from shared.redact import configure_logging, redact
    from shared.settings import NatsSettings, SettingsError
    from warp.settings import load_warp_settings

    try:
        # the TypeScript Warp's (and Pattern's) variables: read with their meaning, or refused
        notices = apply_environment(["warp", "pattern"] if args.with_memory else ["warp"])
        # Every setting is read here, once, and passed down; nothing below reads the environment.
        nats_settings = NatsSettings()
        # Scoped NATS credentials are one agent's: Warp takes that agent's identity.
        identity_settings = bound_to_credential(load_settings(), agent_credential(nats_settings))
        identity = resolve_identity(identity_settings)
        check_warp_files(identity.project_path)
        settings = load_warp_settings()
    except (IdentityError, SettingsError, InvalidNameError, LegacySettingError, CredentialsError) as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(redact(describe_validation(exc.errors(include_url=False))))
    configure_logging(settings.log_level)
    leave_out_unused_imports(nats_settings.url)  # before nats-py and the MCP SDK load
    if notices:
        import logging

        for notice in notices:
            logging.getLogger("loom.warp").warning("%s", notice)

    from warp.runtime import WarpRuntime

    rt = WarpRuntime(
        identity,
        settings,
        nats_url=nats_settings.url,
        nats_settings=nats_settings,
        explicit_instance=identity_settings.instance,
    )
    if args.http:
        built = _build(rt, settings, args.with_memory)
        if isinstance(built, str):
            return _fail(built)
        server, attach = built
        attach()
        import anyio

        from shared.loop import anyio_options, keep_startup_heap

        keep_startup_heap()

        anyio.run(_serve_http, server, rt, args.host, args.port, args.path, backend_options=anyio_options())
        return 0
    from shared.loop import run_main

    return run_main(_run_stdio(rt, settings, args.with_memory))


Attach = Callable[[], None]
"""What a built part still has to hook into the runtime, on the runtime's own thread."""


def _nothing_to_attach() -> None:
    """Warp's own tools attach nothing: they reach the runtime they were built with."""


def _build(
    rt: WarpRuntime, settings: WarpSettings, with_memory: bool
) -> tuple[MCPServer[WarpRuntime], Attach] | str:
    """The MCP server (the SDK, the tools, tracing: most of Warp's start-up) and what it
    still has to attach to the runtime, or why it cannot be served. Touches nothing of the
    runtime's, so it may run in a thread while the runtime connects."""
    from shared.trace import tracing

    tracing.configure("loom-warp")  # spans of MCP tool calls and of work (docs/operations.md, Traces)
    memory: list[Tool] = []
    attach: Attach = _nothing_to_attach
    if with_memory:
        mounted = _memory_tools(rt, settings)
        if isinstance(mounted, str):
            return mounted
        memory, attach = mounted
    from warp.server import build_server

    return build_server(rt, also=memory), attach


async def _run_stdio(rt: WarpRuntime, settings: WarpSettings, with_memory: bool) -> int:
    """Serve MCP on stdio. Warp starts reaching NATS and answers ``initialize``
    (:mod:`warp.handshake`) while the SDK and the tools load in a thread."""
    import asyncio
    import contextlib
    import logging

    from shared.loop import keep_startup_heap
    from warp.stdio import Early, answer_initialize, open_pipes, serve_stdio

    try:
        pipes = await open_pipes()
    except (OSError, ValueError) as exc:
        logging.getLogger("loom.warp").info("stdio is not a pipe (%s); using the SDK's transport", exc)
        pipes = None
    rt.start(register_when_serving=True)
    first = asyncio.create_task(answer_initialize(pipes)) if pipes is not None else None
    try:
        built = await asyncio.to_thread(_build, rt, settings, with_memory)
    except BaseException:
        await rt.stop("start-up failed")
        raise
    if isinstance(built, str):
        await rt.stop("start-up failed")
        return _fail(built)
    server, attach = built
    attach()
    rt.serving()
    keep_startup_heap()  # the SDK, the tools and the connection: built for the process's life
    early = Early()
    if first is not None:
        if not first.done():  # no message yet: the SDK reads the first one itself
            first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            early = await first

    def leave() -> None:
        # Offline already: end the session from our side.
        if pipes is not None:
            pipes.stop_reading()
        else:  # the SDK's reader thread may sit in a read nothing can interrupt
            logging.shutdown()
            os._exit(0)

    rt.on_exit = leave
    _install_signals(rt)
    await serve_stdio(server, pipes, early)
    return 0


def _memory_tools(rt: WarpRuntime, warp: WarpSettings) -> tuple[list[Tool], Attach] | str:
    """Pattern's memory tools for this server, on Warp's NATS connection and identity (and
    Warp's reading of the shared ``LOOM_*`` variables), and how they attach to the runtime;
    or why they cannot be served."""
    try:
        from pattern.config import PatternConfig, PatternConfigError
        from pattern.runtime import PatternRuntime
        from pattern.tools import pattern_tools
    except ImportError as exc:
        return f"--with-memory: Pattern is not available in this installation ({exc})"
    try:
        config = PatternConfig.from_env(warp)
    except PatternConfigError as exc:
        return str(exc)
    # No identity to show until Warp has taken its instance id (another Warp may hold the plain one).
    memory = PatternRuntime(rt.base_identity, config, nats_settings=rt.nats_settings, identity_settled=False)

    def start(svc: Services) -> None:
        memory.use_connection(svc.nc, svc.identity)  # the instance id Warp settled on

    def attach() -> None:
        rt.when_ready(start)
        rt.on_stop.append(memory.close)

    return pattern_tools(memory.get_service, health=memory.health, until_ready=memory.until_ready), attach


def _install_signals(rt: WarpRuntime) -> None:
    import asyncio
    import signal

    from shared.models import ControlRequest

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        request = ControlRequest(
            action="shutdown", reason=signal.Signals(sig).name, requested_by="signal", grace_s=SIGNAL_GRACE_S
        )
        loop.add_signal_handler(sig, rt.request_shutdown, request)


async def _serve_http(
    server: MCPServer[WarpRuntime], rt: WarpRuntime, host: str, port: int, path: str
) -> None:
    from shared.mcp.http import serve_http, streamable_app

    def stoppable(http: Any) -> None:
        def leave() -> None:
            http.should_exit = True

        rt.on_exit = leave

    await serve_http(streamable_app(server, path=path, host=host), host, port, stoppable)


if __name__ == "__main__":
    sys.exit(main())
