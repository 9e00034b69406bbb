"""``/a2a/{project}``: each project as an A2A agent (docs/a2a.md).

Weft's own dependencies check the token (``401`` as on every route) and the project
(``400``); then the SDK's JSON-RPC dispatcher takes the request (A2A 1.0 method names and
the 0.3 ones, server-sent events for streams) and calls :class:`LoomRequestHandler`.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from fastapi import APIRouter, Depends, Header, Path, Request
from fastapi.responses import JSONResponse, Response

from shared.names import PROJECT_ID_RULE
from weft.a2a.errors import scrub, translate
from weft.a2a.handler import SERVED_KEY, LoomRequestHandler, Served, granted_by
from weft.a2a.mapping import A2AInvalid, check_state_filter
from weft.deps import ScopeDep, StateDep, choose_project, require_token
from weft.errors import ERROR_RESPONSES
from weft.settings import WeftSettings
from weft.state import WeftState
from weft.strictquery import STRICT_QUERY
from weft.tokens import ApiScope

router = APIRouter(
    tags=["a2a"], dependencies=[STRICT_QUERY, Depends(require_token)], responses=ERROR_RESPONSES
)

ProjectPath = Annotated[str, Path(description=f"Project id ({PROJECT_ID_RULE})", max_length=63)]
ProjectHeader = Annotated[
    str | None, Header(alias="X-Loom-Project", description="If given, must match the path")
]


class LoomContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context (headers, user) plus what the route established."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[SERVED_KEY] = request.state.a2a_served
        context.state.get("headers", {}).pop("authorization", None)  # the handler never needs it
        return context


def create_dispatcher(settings: WeftSettings) -> JsonRpcDispatcher:
    handler = LoomRequestHandler(default_capability=settings.a2a_default_capability)
    return JsonRpcDispatcher(handler, context_builder=LoomContextBuilder(), enable_v0_3_compat=True)


def quiet_sdk_logs() -> None:
    """The SDK logs parse failures with the text of the rejected input; its log lines keep
    their template only (the response says what was wrong, without the value)."""
    for name in (
        "a2a.server.routes.jsonrpc_dispatcher",
        "a2a.server.routes.rest_dispatcher",
        "a2a.compat.v0_3.jsonrpc_adapter",
        "a2a.utils.version_validator",
        "a2a.utils.error_handlers",
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _TemplateOnly) for f in logger.filters):
            logger.addFilter(_TemplateOnly())
    # Webhook lines name the task; the URL (which may carry a secret) and the HTTP error
    # (which quotes it) are left out.
    for name in ("a2a.server.tasks.base_push_notification_sender", "a2a.utils.push_url_validator"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _WithoutUrls) for f in logger.filters):
            logger.addFilter(_WithoutUrls())


class _WithoutUrls(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                "<webhook url>" if isinstance(a, str) and "://" in a else a for a in record.args
            )
        elif record.args:
            record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


class _TemplateOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


async def serve(
    request: Request, state: WeftState, scope: ApiScope, project: str, header: str | None
) -> None:
    """What the SDK's handler reads from the request (:class:`Served`): the project of the URL
    (the header, if given, must agree), what the token may do there, Weft's address."""
    context = await state.hub.get(choose_project(state, header, project))
    request.state.a2a_served = Served(
        project=context,
        weft=state,
        disconnected=request.is_disconnected,
        granted=granted_by(scope),
        base_url=base_url(state, request),
    )


def base_url(state: WeftState, request: Request) -> str:
    """Weft's address as clients reach it: the setting, else the request's own."""
    return state.settings.public_url or str(request.base_url).rstrip("/")


_RPC_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object", "description": "A JSON-RPC 2.0 request"}}
        },
    }
}


@router.post(
    "/a2a/{project}",
    summary="A2A JSON-RPC endpoint of a project",
    description=(
        "A2A 1.0 (`SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, "
        "`SubscribeToTask`; header `A2A-Version: 1.0`) and the 0.3 names (`message/send`, "
        "`message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`). JSON-RPC errors "
        "are answered with HTTP 200; token and project problems with Weft's error envelope."
    ),
    response_class=Response,
    responses={200: {"description": "A JSON-RPC response, or a text/event-stream for the streaming methods"}},
    openapi_extra=_RPC_DOC,
)
async def a2a_rpc(
    request: Request,
    project: ProjectPath,
    state: StateDep,
    scope: ScopeDep,
    x_loom_project: ProjectHeader = None,
) -> Response:
    await serve(request, state, scope, project, x_loom_project)
    refused = await _unknown_state_filter(request)
    if refused is not None:
        return refused
    dispatcher: JsonRpcDispatcher = request.app.state.a2a
    return scrub(await dispatcher.handle_requests(request))


async def _unknown_state_filter(request: Request) -> Response | None:
    """A ``ListTasks`` whose ``status`` names no task state, refused (-32602): the SDK's
    parser drops an enum name it does not know, which would list every task instead."""
    try:
        body = await request.json()
    except ValueError:
        return None  # the dispatcher answers it
    params = body.get("params") if isinstance(body, dict) and body.get("method") == "ListTasks" else None
    if not isinstance(params, dict) or params.get("status") is None:
        return None
    try:
        check_state_filter(params["status"])
    except A2AInvalid as exc:
        request_id = body.get("id")
        known_id = request_id if isinstance(request_id, str | int) else None
        return JSONResponse(build_error_response(known_id, translate(exc)))
    return None


# The card's URL with a trailing slash is the same endpoint: Starlette would answer it with a
# 307 redirect, which JSON-RPC clients do not follow (the A2A conformance kit posts there).
router.post("/a2a/{project}/", include_in_schema=False, response_class=Response)(a2a_rpc)
