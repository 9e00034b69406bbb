"""The FastAPI application: :func:`create_app` wires settings, NATS, projects and routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from nats.aio.client import Client as NatsClient

from shared.nats.client import NatsConnectError
from shared.nats.server import NatsServerError
from shared.tasks import stop_task
from shared.trace import tracing
from shared.work.autonomy import load_autonomy_file
from shared.work.policy import BoundaryPolicy, load_policy_file
from weft import __version__, console, errors
from weft.a2a.push import PUSH_EXTENSION, push_attach
from weft.banner import print_banner
from weft.deps import require_token
from weft.interop import ProtocolDirectory
from weft.metrics import Metrics, RequestTimer
from weft.narrate import NARRATE_EXTENSION, narrate_attach
from weft.notify.dispatch import NOTIFY_EXTENSION, notify_attach
from weft.project.hub import ProjectHub
from weft.routes import (
    a2a,
    a2a_rest,
    agents,
    autonomy,
    cards,
    channels,
    contexts,
    dlq,
    health,
    hooks,
    landing,
    leases,
    mechanisms,
    notify,
    pause,
    questions,
    repository,
    spinups,
    stats,
    targets,
    usage,
    work,
    ws,
)
from weft.routing import Router
from weft.runtime import NatsRuntime, open_nats
from weft.settings import WeftSettings
from weft.spinup import SPINUP_EXTENSION, SpinupService, default_service
from weft.state import NatsInfo, WeftState
from weft.strictquery import STRICT_QUERY
from weft.sweeper import run_sweeper

log = logging.getLogger("loom.weft")
DOCS_ASSETS = "/docs/assets"
"""Where /docs loads Swagger UI's files from (this server, never a CDN)."""

DESCRIPTION = """Weft coordinates a Loom fleet: work submission and routing, the agent registry,
spin-up targets, dead letters and live events, over NATS JetStream.

Every route but `/health` and `/metrics` needs `Authorization: Bearer <token>` when
`WEFT_API_TOKENS` is set: `read` tokens may use every GET and the WebSocket, `operate`
tokens also submit, cancel and retry work, `admin` tokens also manage targets and stop
agents (403 names the scope a route needs). Name the project with the `X-Loom-Project` header or the
`project` query parameter. Errors are `{"error": code, "message": ..., "details": ...}`.
Each project is also an A2A agent at `/a2a/{project}` (JSON-RPC, see docs/a2a.md)."""


def load_policy(settings: WeftSettings) -> BoundaryPolicy | None:
    """The policy file's content, or None (keep whatever the projects already have)."""
    return None if settings.policy_file is None else load_policy_file(settings.policy_file)


def create_app(
    settings: WeftSettings | None = None,
    *,
    nc: NatsClient | None = None,
    runtime: NatsRuntime | None = None,
    spinup: SpinupService | None = None,
) -> FastAPI:
    """Build a Weft app.

    NATS: ``nc`` is a connection to use (left open on shutdown); ``runtime`` one already
    opened by :func:`weft.runtime.open_nats` (closed on shutdown, with its embedded server);
    neither: the lifespan opens one. ``spinup``: the spin-up service (default:
    :func:`weft.spinup.default_service`)."""
    config = settings or WeftSettings()
    tracing.configure("loom-weft")  # once per process (docs/operations.md, Traces)
    policy = load_policy(config)  # fail before serving anything when a file is bad
    autonomy_policy = None if config.autonomy_file is None else load_autonomy_file(config.autonomy_file)
    service = spinup or default_service(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = runtime
        if nc is None and owned is None:
            try:
                owned = await open_nats(config)
            except (NatsServerError, NatsConnectError) as exc:
                log.error("weft cannot start: %s", exc)
                raise
        authority = owned.authority if owned is not None else None
        if owned is not None:
            connection, info = owned.nc, owned.info
        else:
            assert nc is not None
            connection = nc
            info = NatsInfo(url="(provided connection)", embedded=False)
        metrics: Metrics = app.state.metrics
        extensions = {  # attached in this order when a project is served, stopped in reverse
            PUSH_EXTENSION: push_attach(private_allowed=config.a2a_push_private_urls),
            SPINUP_EXTENSION: service.attach,
            NOTIFY_EXTENSION: notify_attach(public_url=config.public_url),
        }
        if config.banner:  # `weft serve`: its terminal tells the fleet's moments (weft/narrate.py)
            extensions[NARRATE_EXTENSION] = narrate_attach()
        hub = ProjectHub(
            connection,
            config,
            metrics,
            policy,
            extensions=extensions,
            credentials=authority,
            autonomy=autonomy_policy,
        )
        state = WeftState(
            settings=config,
            hub=hub,
            router=Router(service),
            spinup=service,
            metrics=metrics,
            nats=info,
            credentials=authority,
            interop=ProtocolDirectory(connection),
        )
        app.state.weft = state
        sweeper: asyncio.Task[None] | None = None
        grpc_server: Any = None
        try:
            if authority is not None:
                await authority.start()
            await service.start(hub)
            await hub.get(config.project_id)
            if config.a2a_grpc_port is not None:
                from weft.a2a.grpc import start_grpc  # grpc is imported only when served

                base = config.public_url or f"http://{config.host}:{config.port}"
                grpc_server, state.a2a_grpc_port = await start_grpc(
                    state, app.state.a2a.request_handler, config.host, config.a2a_grpc_port, base
                )
            sweeper = asyncio.create_task(run_sweeper(hub, state.router, config), name="sweeper")
            if config.banner:
                print_banner(config, info, policy)
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop(grace=2)
            await stop_task(sweeper)
            await state.drain()
            with contextlib.suppress(Exception):
                await state.interop.close()
            with contextlib.suppress(Exception):
                await service.stop()
            await hub.close()
            if authority is not None:
                await authority.stop()
            if owned is not None:
                await owned.close()

    docs_deps = [] if config.public_docs else [Depends(require_token)]
    app = FastAPI(
        title="Weft",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # FastAPI's own OpenTelemetry server spans join the caller's trace (docs/operations.md,
        # Traces). Weft has its own Prometheus metrics; FastAPI's logs of rejected input would
        # echo it, and its per-operation spans cost a fair share of each request: both off.
        telemetry={
            "tracing": True,
            "metrics": False,
            "logs": False,
            "operation_spans": False,
            "auto_configure": False,
        },
        dependencies=[STRICT_QUERY],
    )
    app.state.metrics = Metrics()
    errors.install(app)
    app.add_middleware(RequestTimer, metrics=app.state.metrics)
    app.state.a2a = a2a.create_dispatcher(config)
    app.state.a2a_rest = a2a_rest.create_rest_dispatcher(app.state.a2a.request_handler)
    a2a.quiet_sdk_logs()
    for module in (
        health,
        agents,
        work,
        dlq,
        questions,
        leases,
        targets,
        spinups,
        mechanisms,
        stats,
        channels,
        contexts,
        ws,
        a2a,
        a2a_rest,
        cards,
        usage,
        repository,
        landing,
        hooks,
        pause,
        autonomy,
        notify,
    ):
        # Each router's own routes, as they are, not include_router's copies of them: those
        # are built again for every app, on its first request (0.3-0.6 s of CPU for all of
        # Weft's). So a Weft answers its first request at once, and a process that makes
        # many apps (the tests) builds its routes once. The routers list STRICT_QUERY
        # themselves, as nothing app-wide reaches them here.
        app.router.routes.extend(module.router.routes)

    @app.get("/openapi.json", include_in_schema=False, dependencies=docs_deps)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    # Swagger UI's script and style from an installed package (fastapi-offline ships them),
    # not a CDN: /docs works on a machine without internet. They are the library's public
    # files, served without a token (a browser loads them without one).
    app.mount(
        DOCS_ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-assets"
    )

    @app.get("/docs", include_in_schema=False, dependencies=docs_deps)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Weft API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )

    console.install(app)
    return app
