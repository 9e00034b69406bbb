"""``weft``: run the coordinator (``weft serve``) and a few offline helpers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from shared.identity import IdentityError
from shared.names import InvalidNameError
from shared.policy import PolicyError, load_policy_file
from shared.redact import configure_logging, redact
from shared.server import NatsServerError
from weft import __version__

app = typer.Typer(
    name="weft",
    help="Weft: the Loom fabric's coordinator (REST + WebSocket over NATS JetStream).",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(message: str, code: int = 2) -> None:
    print(f"weft: {redact(message)}", file=sys.stderr)
    raise typer.Exit(code)


def _settings(**overrides: object) -> object:
    from weft.settings import WeftSettings

    try:
        return WeftSettings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: "
            + str(e.get("msg", "")).removeprefix("Value error, ")
            for e in exc.errors()
        )
        _fail(f"invalid settings: {problems}")
    except (IdentityError, InvalidNameError) as exc:
        _fail(str(exc))
    raise AssertionError("unreachable")


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
    import uvicorn

    from shared.names import validate_project_id
    from weft.app import create_app
    from weft.settings import WeftSettings

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
    assert isinstance(settings, WeftSettings)
    configure_logging(settings.log_level)
    try:
        application = create_app(settings)
    except PolicyError as exc:
        _fail(str(exc))
    try:
        uvicorn.run(
            application,
            host=settings.host,
            port=settings.port,
            log_config=None,
            log_level=settings.log_level.lower(),
            access_log=False,
            ws_ping_interval=settings.ws_ping_interval_s,
            ws_ping_timeout=settings.ws_ping_interval_s,
            lifespan="on",
        )
    except NatsServerError as exc:
        _fail(str(exc), 3)


@app.command("check-policy")
def check_policy(path: Annotated[Path, typer.Argument(help="Policy file (YAML or JSON)")]) -> None:
    """Validate a boundary policy file and print it as JSON."""
    try:
        policy = load_policy_file(path)
    except PolicyError as exc:
        _fail(str(exc))
        return
    print(json.dumps(policy.model_dump(mode="json"), indent=2))


@app.command()
def openapi() -> None:
    """Print the OpenAPI document (the REST contract) without starting a server."""
    from weft.app import create_app
    from weft.settings import WeftSettings

    settings = _settings()
    assert isinstance(settings, WeftSettings)
    print(json.dumps(create_app(settings.model_copy(update={"policy_file": None})).openapi(), indent=2))


@app.command()
def version() -> None:
    """Print Weft's version."""
    print(__version__)


def main() -> None:
    app()
