"""``pattern``: the Pattern memory MCP server on stdio (``--http``: Streamable HTTP).

Everything except MCP frames goes to stderr. Configuration comes from the
environment (identity as for Warp: ``LOOM_PROJECT_ID``, ``LOOM_PROJECT_PATH``,
``LOOM_AGENT_ID``, ``LOOM_SUBAGENT_TYPE``, ``LOOM_USER_ID``; NATS as
everywhere: ``NATS_URL`` ...; and ``PATTERN_*``). The TypeScript Pattern's
variables are read with their old meaning or refused (:mod:`shared.legacy`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pattern.runtime import PatternRuntime

log = logging.getLogger("loom.pattern")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loom-fabric")
    except PackageNotFoundError:
        return "0"


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pattern", description="Loom Pattern memory MCP server (stdio, or Streamable HTTP with --http)."
    )
    parser.add_argument("--version", action="version", version=f"pattern {_version()}")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8766, help="HTTP port (default 8766)")
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    parser.add_argument(
        "--zygote",
        metavar="SOCKET",
        help="import once and fork every pattern started with LOOM_PATTERN_ZYGOTE=SOCKET (docs/pattern.md)",
    )
    parser.add_argument(
        "--log-level",
        default=None,
        choices=LOG_LEVELS,
        help="stderr log level (default LOOM_LOG_LEVEL, else INFO)",
    )
    return parser.parse_args(argv)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("must be a number between 1 and 65535")
    return int(text)


async def _serve(runtime: PatternRuntime, args: argparse.Namespace) -> None:
    from pattern.server import build_server
    from shared.loop import keep_startup_heap

    server = build_server(runtime, _version())
    runtime.start()
    keep_startup_heap()  # the SDK and the tools: built for the process's life
    try:
        if args.http:
            from shared.mcp.http import serve_http, streamable_app

            app = streamable_app(server, path=args.path, host=args.host)
            log.info("pattern: Streamable HTTP on http://%s:%d%s", args.host, args.port, args.path)
            await serve_http(app, args.host, args.port, stop_on_signals=True)
        else:
            await server.run_stdio_async()
    finally:
        await runtime.close()


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # Only the standard library so far: a ``pattern`` forked from a zygote stands in for
    # its child without importing what the child runs.
    from pattern.zygote import PROGRAM
    from shared.zygote import start

    forked = start(PROGRAM, args.zygote, argv, main)
    if forked is not None:
        return forked

    from pydantic import ValidationError

    from shared.footprint import leave_out_unused_imports
    from shared.identity import IdentityError, bound_to_credential, load_settings, resolve_identity
    from shared.legacy import LegacySettingError, apply_environment
    from shared.loop import run_main
    from shared.names import InvalidNameError
    from shared.nats.auth import CredentialsError, agent_credential
    from shared.redact import configure_logging, redact
    from shared.settings import NatsSettings, SettingsError, load_loom_settings

    try:
        notices = apply_environment(["pattern"])
        # Every setting is read here, once, and passed down; nothing below reads the environment.
        shared = load_loom_settings()
        configure_logging(args.log_level or shared.log_level)
        for notice in notices:
            log.warning("%s", notice)
        nats_settings = NatsSettings()
        # An agent's own process, as Warp's: what it would import and never use is paid once
        # per agent (shared/footprint.py). Before anything below loads nats-py or the MCP SDK.
        leave_out_unused_imports(nats_settings.url)
        from pattern.config import PatternConfig
        from shared.trace import tracing

        tracing.configure("loom-pattern")  # the MCP SDK's spans of each tool call (docs/operations.md)
        # scoped NATS credentials are one agent's: take that agent's identity (docs/security.md)
        identity = resolve_identity(bound_to_credential(load_settings(), agent_credential(nats_settings)))
        config = PatternConfig.from_env(shared)
    except (IdentityError, SettingsError, InvalidNameError, LegacySettingError, CredentialsError) as exc:
        print(f"pattern: {redact(exc)}", file=sys.stderr)
        sys.exit(2)
    except ValidationError as exc:
        problems = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
        print(f"pattern: invalid NATS configuration: {redact(problems)}", file=sys.stderr)
        sys.exit(2)
    log.info(
        "pattern %s: agent %s, project %s%s",
        _version(),
        identity.agent_id,
        identity.project_id,
        f", sub-agent of {identity.parent_id}" if identity.parent_id else "",
    )
    from pattern.runtime import PatternRuntime

    runtime = PatternRuntime(identity, config, nats_settings=nats_settings)
    with contextlib.suppress(KeyboardInterrupt):
        run_main(_serve(runtime, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
