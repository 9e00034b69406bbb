"""The Agent Cards (docs/a2a.md): open to anyone, as A2A discovery needs, even where every
other route wants a token. Behind tokens the card says where to call and how to
authenticate, and names no live capability: those are in the extended card
(``GetExtendedAgentCard`` on the A2A endpoint, with a token)."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0, VERSION_HEADER
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf.json_format import MessageToDict

from weft.a2a.card import agent_card, public_card
from weft.deps import StateDep, choose_project
from weft.errors import ERROR_RESPONSES
from weft.routes.a2a import ProjectHeader, ProjectPath, base_url
from weft.state import WeftState
from weft.strictquery import STRICT_QUERY

router = APIRouter(tags=["a2a"], responses=ERROR_RESPONSES, dependencies=[STRICT_QUERY])

ProjectQuery = Annotated[
    str | None, Query(description="Project id; alternative to the X-Loom-Project header")
]

CARD_MAX_AGE_S = 30
"""How long a client may use a card without asking again: an open Weft's skills follow the fleet."""


async def _card_of(state: WeftState, project_id: str, request: Request) -> AgentCard:
    url = base_url(state, request)
    if state.settings.auth_enabled:  # no read of the project for a caller without a token
        return public_card(project_id, base_url=url, auth=True, grpc_port=state.a2a_grpc_port)
    project = await state.hub.get(project_id)
    return await agent_card(project, base_url=url, auth=False, grpc_port=state.a2a_grpc_port)


def card_response(card: AgentCard, request: Request) -> Response:
    """The card in the version the client speaks: ``A2A-Version: 1.0`` gets the 1.0 document
    alone (its schema allows no other top-level field); without it, the SDK's document that
    also carries the 0.3 fields (``url``, ``preferredTransport``, ``protocolVersion``), which
    0.3 clients read and 1.0 clients ignore. One document cannot be both (docs/a2a.md).
    An ETag lets a client revalidate (304) instead of fetching it again."""
    strict = request.headers.get(VERSION_HEADER, "").strip() == PROTOCOL_VERSION_1_0
    body = json.dumps(MessageToDict(card) if strict else agent_card_to_dict(card)).encode()
    headers = {
        "ETag": '"' + hashlib.sha256(body).hexdigest()[:32] + '"',
        "Cache-Control": f"public, max-age={CARD_MAX_AGE_S}",
        "Vary": f"{VERSION_HEADER}, X-Loom-Project",
    }
    if headers["ETag"] in (request.headers.get("If-None-Match") or ""):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get(
    "/a2a/{project}" + AGENT_CARD_WELL_KNOWN_PATH,
    summary="Agent Card of a project (no token needed)",
    response_class=JSONResponse,
)
async def project_card(
    request: Request, project: ProjectPath, state: StateDep, x_loom_project: ProjectHeader = None
) -> Response:
    project_id = choose_project(state, x_loom_project, project)
    return card_response(await _card_of(state, project_id, request), request)


@router.get(
    AGENT_CARD_WELL_KNOWN_PATH,
    summary="Agent Card of the project named by X-Loom-Project or ?project= (default: Weft's own)",
    response_class=JSONResponse,
)
async def default_card(
    request: Request, state: StateDep, x_loom_project: ProjectHeader = None, project: ProjectQuery = None
) -> Response:
    project_id = choose_project(state, x_loom_project, project)
    return card_response(await _card_of(state, project_id, request), request)
