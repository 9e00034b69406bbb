"""``WS /api/ws``: live events of one project (protocol in :mod:`weft.websocket`)."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse

from shared.errors import LoomError
from weft.deps import choose_project, get_state, token_scope, unauthorized_message
from weft.errors import error_body, http_status
from weft.strictquery import STRICT_QUERY
from weft.websocket import Session, subscriptions_from_query

router = APIRouter(dependencies=[STRICT_QUERY])

BEARER_PROTOCOL = "bearer"


def _token(ws: WebSocket) -> tuple[str | None, bool]:
    """(token, via subprotocol): query ``token``, ``Sec-WebSocket-Protocol: bearer, <token>`` or
    an ``Authorization: Bearer`` header."""
    protocols = [p.strip() for p in ws.scope.get("subprotocols", [])]
    if len(protocols) >= 2 and protocols[0].lower() == BEARER_PROTOCOL:
        return protocols[1], True
    if ws.query_params.get("token"):
        return ws.query_params["token"], False
    header = ws.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip(), False
    return None, False


async def _deny(ws: WebSocket, exc: LoomError) -> None:
    body = error_body(exc).model_dump()
    try:
        await ws.send_denial_response(JSONResponse(body, status_code=http_status(exc)))
    except RuntimeError:  # a server without the denial-response extension: plain refusal
        await ws.close(code=1008, reason=exc.code)


@router.websocket("/api/ws")
async def events_socket(ws: WebSocket) -> None:
    state = get_state(ws)
    token, via_protocol = _token(ws)
    if token_scope(state, token) is None:  # any valid token may watch (read)
        await _deny(ws, LoomError(unauthorized_message(token, websocket=True), code="unauthorized"))
        return
    try:
        project_id = choose_project(state, ws.headers.get("x-loom-project"), ws.query_params.get("project"))
        initial = subscriptions_from_query(ws.query_params)
    except LoomError as exc:
        await _deny(ws, exc)
        return
    project = await state.hub.get(project_id)
    await ws.accept(subprotocol=BEARER_PROTOCOL if via_protocol else None)
    state.metrics.websockets.inc()
    try:
        await Session(ws, state, project).run(initial)
    finally:
        state.metrics.websockets.dec()
