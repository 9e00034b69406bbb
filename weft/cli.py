"""``weft``: run the coordinator (``weft serve``) and a few offline helpers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from pydantic import BaseModel, ValidationError

from shared.errors import describe_validation
from shared.identity import IdentityError
from shared.legacy import LegacySettingError, apply_environment
from shared.names import InvalidNameError, validate_project_id
from shared.nats.auth import CredentialsError, Issuer, server_auth_config
from shared.redact import configure_logging, redact
from weft import __version__
from weft.serverlog import quiet_server_noise
from weft.settings import WeftSettings

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("loom.weft")

# The server's modules (FastAPI, uvicorn, NATS) are imported by the commands that serve, so
# `weft check-policy`, `weft version` and `weft demo` start at once, and `weft serve` can
# leave out what it never uses before nats-py loads (:func:`_leave_out_unused`).

GRACEFUL_SHUTDOWN_S = 10
"""Seconds a stopping ``weft serve`` gives open requests before it cancels them."""
KEEP_ALIVE_S = 30
"""Seconds an idle keep-alive connection stays open. Longer than clients keep theirs (httpx:
5 s, uvicorn's own default too): were the server's the shorter, a client could send its next
request on a connection the server is closing, and get "Server disconnected without sending
a response" (a scenario polling Weft every 0.25 s on a stalled host did)."""

app = typer.Typer(
    name="weft",
    help="Weft: the Loom fabric's coordinator (REST + WebSocket over NATS JetStream).",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(message: str, code: int = 2) -> NoReturn:
    print(f"weft: {redact(message)}", file=sys.stderr)
    raise typer.Exit(code)


def _leave_out_unused() -> None:
    """nats-py's WebSocket transport (aiohttp, 0.3 s of CPU to import and 20 MB) unless
    Weft reaches NATS over ``ws://`` (shared/footprint.py). A NATS setting that is refused
    is reported, naming its field, by the settings read after this."""
    from shared.footprint import leave_out_unused_imports
    from shared.settings import NatsSettings

    try:
        url = NatsSettings().url
    except ValidationError:
        return
    leave_out_unused_imports(url, mcp_server=False)


def _adopt() -> list[str]:
    """The TypeScript Weft's variables (API_PORT, ...): translated to ours, or refused."""
    try:
        return apply_environment(["weft"])
    except LegacySettingError as exc:
        _fail(str(exc))


def _settings(**overrides: object) -> WeftSettings:
    try:
        return WeftSettings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:
        _fail(f"invalid settings: {describe_validation(exc.errors())}")
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
    notices = _adopt()
    _leave_out_unused()
    from shared.work.policy import PolicyError, load_policy_file

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
    problem = settings.exposure_problem()
    if problem is not None:
        _fail(problem)
    configure_logging(settings.log_level)
    quiet_server_noise()
    for notice in notices:
        log.warning("%s", notice)
    if settings.allow_open_api and not settings.auth_enabled and not settings.loopback_only:
        log.warning(
            "WEFT_ALLOW_OPEN_API is set: the API on %s:%s is OPEN to everyone who can reach it, "
            "including registering local targets that run commands on this host",
            settings.host,
            settings.port,
        )
    import uvicorn

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
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        started = runner.run(_serve(settings, config))
    if not started:
        raise typer.Exit(3)


async def _serve(settings: WeftSettings, config: uvicorn.Config) -> bool:
    """Open NATS first (so a start-up failure is one clear line), then serve until signalled."""
    import uvicorn

    from shared.loop import keep_startup_heap
    from shared.nats.client import NatsConnectError
    from shared.nats.server import NatsServerError
    from shared.work.policy import PolicyError
    from weft.app import create_app
    from weft.runtime import open_nats

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
    keep_startup_heap()  # the app, its routes and models: built for the process's life
    # uvicorn stops cleanly on Ctrl-C, then raises SIGINT again for the previous handler:
    # Python's default would turn a person's normal stop into KeyboardInterrupt and exit 130
    # (and `make run` into "Error 130"). Ctrl-C is how one stops Weft: it ends with status 0.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        await server.serve()
    finally:
        signal.signal(signal.SIGINT, previous)
    return server.started


def _print_checked(load: Callable[[Path], BaseModel], path: Path) -> None:
    """A policy file as Weft reads it, printed as JSON; one clear line when it is refused."""
    from shared.work.autonomy import AutonomyError
    from shared.work.policy import PolicyError

    try:
        policy = load(path)
    except (PolicyError, AutonomyError) as exc:
        _fail(str(exc))
    print(json.dumps(policy.model_dump(mode="json"), indent=2))


@app.command("check-policy")
def check_policy(path: Annotated[Path, typer.Argument(help="Policy file (YAML or JSON)")]) -> None:
    """Validate a boundary policy file and print it as JSON."""
    from shared.work.policy import load_policy_file

    _print_checked(load_policy_file, path)


@app.command("check-autonomy")
def check_autonomy(path: Annotated[Path, typer.Argument(help="Autonomy policy file (YAML or JSON)")]) -> None:
    """Validate an autonomy policy file (WEFT_AUTONOMY_FILE) and print it as JSON."""
    from shared.work.autonomy import load_autonomy_file

    _print_checked(load_autonomy_file, path)


nats_auth = typer.Typer(help="Scoped NATS auth: the operator, its accounts and the issuer Weft holds.")
app.add_typer(nats_auth, name="nats-auth")


@nats_auth.command("init")
def nats_auth_init(
    folder: Annotated[Path, typer.Argument(help="Where to write issuer.json (a secret) and auth.conf")],
    resolver_dir: Annotated[
        str, typer.Option(help="Where each nats-server keeps account updates (on its data volume)")
    ] = "/data/jwt",
    keep_accounts: Annotated[
        Path | None,
        typer.Option(
            help="An issuer.json whose accounts to keep (their streams and buckets stay); new operator"
        ),
    ] = None,
) -> None:
    """Make a new operator with its accounts: issuer.json for Weft (WEFT_NATS_ISSUER, mode 0600,
    a secret) and auth.conf for every nats-server (include it in nats.conf; no secret)."""
    folder.mkdir(parents=True, exist_ok=True)
    issuer_path, conf_path = folder / "issuer.json", folder / "auth.conf"
    for path in (issuer_path, conf_path):
        if path.exists():
            _fail(f"{path} already exists: a new operator invalidates every credential; remove it first")
    issuer = Issuer.generate()
    if keep_accounts is not None:  # JetStream data belongs to the account key: keep it
        try:
            old = Issuer.from_json(keep_accounts.read_text())
        except (OSError, CredentialsError) as exc:
            _fail(f"--keep-accounts: {exc}")
        issuer = Issuer(
            operator_seed=issuer.operator_seed, system_seed=old.system_seed, account_seed=old.account_seed
        )
    fd = os.open(issuer_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(issuer.to_json())
    conf_path.write_text(server_auth_config(issuer, resolver_dir))
    print(f"wrote {issuer_path} (secret: Weft's WEFT_NATS_ISSUER) and {conf_path} (nats.conf include)")


@app.command()
def demo(
    work: Annotated[
        Path | None,
        typer.Option(help="Work to submit: any file `shuttle submit --file` takes (default: the demo's)."),
    ] = None,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the fabric up afterwards (open its console) until Ctrl-C."),
    ] = False,
) -> None:
    """See the loop close without an AI agent, on a throw-away fabric that is removed afterwards
    (with --keep, once you stop it)."""
    from weft.demo import WORK_FILE, run_demo

    raise typer.Exit(run_demo(work or WORK_FILE, keep=keep))


@app.command()
def openapi() -> None:
    """Print the OpenAPI document (the REST contract) without starting a server."""
    _adopt()
    from weft.app import create_app

    settings = _settings()
    print(json.dumps(create_app(settings.model_copy(update={"policy_file": None})).openapi(), indent=2))


@app.command()
def version() -> None:
    """Print Weft's version."""
    print(__version__)


def main() -> None:
    app()
