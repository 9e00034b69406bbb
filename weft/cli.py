"""``weft``: run the coordinator (``weft serve``) and a few offline helpers."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
import uvicorn
from pydantic import ValidationError

from shared.errors import describe_problems, validation_problems
from shared.identity import IdentityError
from shared.names import InvalidNameError, validate_project_id
from shared.natsclient import NatsConnectError
from shared.policy import PolicyError, load_policy_file
from shared.redact import configure_logging, redact
from shared.server import NatsServerError
from weft import __version__
from weft.app import create_app
from weft.runtime import open_nats
from weft.settings import WeftSettings

GRACEFUL_SHUTDOWN_S = 10
"""Seconds a stopping ``weft serve`` gives open requests before it cancels them."""

app = typer.Typer(
    name="weft",
    help="Weft: the Loom fabric's coordinator (REST + WebSocket over NATS JetStream).",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(message: str, code: int = 2) -> NoReturn:
    print(f"weft: {redact(message)}", file=sys.stderr)
    raise typer.Exit(code)


def _settings(**overrides: object) -> WeftSettings:
    try:
        return WeftSettings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:
        _fail(f"invalid settings: {describe_problems(validation_problems(exc.errors()), limit=10)}")
    except (IdentityError, InvalidNameError) as exc:
        _fail(str(exc))


@app.callback()
def main_callback() -> None:
    """Weft: the Loom fabric's coordinator."""


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on (WEFT_HOST)")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="Port (WEFT_PORT)")] = None,
    project: Annotated[str | None, typer.Option(help="Default project id (WEFT_PROJECT_ID)")] = None,
    policy: Annotated[
        Path | None, typer.Option(help="Boundary policy file, YAML or JSON (WEFT_POLICY_FILE)")
    ] = None,
) -> None:
    """Serve the REST API and WebSocket (starts a bundled nats-server when NATS_URL is unset)."""
    if project is not None:
        try:
            validate_project_id(project, "--project")
        except InvalidNameError as exc:
            _fail(str(exc))
    if policy is not None:
        try:
            load_policy_file(policy)
        except PolicyError as exc:
            _fail(str(exc))
    settings = _settings(host=host, port=port, project_id=project, policy_file=policy, banner=True)
    configure_logging(settings.log_level)
    config = uvicorn.Config(
        "weft.app:create_app",  # replaced below; Config needs an app to compute loop settings
        host=settings.host,
        port=settings.port,
        log_config=None,
        log_level=settings.log_level.lower(),
        access_log=False,
        ws_ping_interval=settings.ws_ping_interval_s,
        ws_ping_timeout=settings.ws_ping_interval_s,
        lifespan="on",
        # A request may wait for work to finish (an A2A SendMessage without returnImmediately):
        # a stopping Weft gives open requests this long, then cancels them (docs/a2a.md).
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        started = runner.run(_serve(settings, config))
    if not started:
        raise typer.Exit(3)


async def _serve(settings: WeftSettings, config: uvicorn.Config) -> bool:
    """Open NATS first (so a start-up failure is one clear line), then serve until signalled."""
    try:
        runtime = await open_nats(settings)
    except (NatsServerError, NatsConnectError) as exc:
        _fail(str(exc), 3)
    try:
        config.app = create_app(settings, runtime=runtime)
    except PolicyError as exc:
        await runtime.close()
        _fail(str(exc))
    server = uvicorn.Server(config)
    await server.serve()
    return server.started


@app.command("check-policy")
def check_policy(path: Annotated[Path, typer.Argument(help="Policy file (YAML or JSON)")]) -> None:
    """Validate a boundary policy file and print it as JSON."""
    try:
        policy = load_policy_file(path)
    except PolicyError as exc:
        _fail(str(exc))
    print(json.dumps(policy.model_dump(mode="json"), indent=2))


@app.command()
def openapi() -> None:
    """Print the OpenAPI document (the REST contract) without starting a server."""
    settings = _settings()
    print(json.dumps(create_app(settings.model_copy(update={"policy_file": None})).openapi(), indent=2))


@app.command()
def version() -> None:
    """Print Weft's version."""
    print(__version__)


def main() -> None:
    app()
