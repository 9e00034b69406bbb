"""FastAPI dependencies shared by every route: state, auth, project, paging."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Query
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from shared.names import PROJECT_ID_RULE, InvalidNameError, validate_project_id
from weft.errors import ApiError
from weft.project import ProjectContext
from weft.state import WeftState

MAX_PAGE = 1000

UNAUTHORIZED_MESSAGE = "a valid bearer token is required (Authorization: Bearer <token>)"
WS_UNAUTHORIZED_MESSAGE = (
    "a valid token is required (Sec-WebSocket-Protocol: bearer, <token>; or ?token=<token>; "
    "or Authorization: Bearer <token>)"
)

_bearer = HTTPBearer(auto_error=False, description="One of the tokens in WEFT_API_TOKENS")


def get_state(connection: HTTPConnection) -> WeftState:
    state: WeftState = connection.app.state.weft
    return state


StateDep = Annotated[WeftState, Depends(get_state)]


def token_ok(state: WeftState, given: str | None) -> bool:
    """Constant-time check against every configured token (no early exit on a match)."""
    if not state.settings.auth_enabled:
        return True
    if not given:
        return False
    candidate = given.encode()
    matched = False
    for token in state.settings.token_values():
        matched |= hmac.compare_digest(candidate, token)
    return matched


async def require_token(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    if not token_ok(state, credentials.credentials if credentials else None):
        raise ApiError("unauthorized", UNAUTHORIZED_MESSAGE, headers={"WWW-Authenticate": "Bearer"})


def choose_project(state: WeftState, header: str | None, query: str | None) -> str:
    """The request's project: header or query (they must agree), else Weft's default."""
    if header and query and header != query:
        raise ApiError(
            "invalid_project",
            "the X-Loom-Project header and the project query parameter disagree; give one",
            field="project",
        )
    chosen = header or query
    if not chosen:
        return state.settings.project_id
    try:
        return validate_project_id(chosen, "project")
    except InvalidNameError as exc:
        raise ApiError("invalid_project", exc.message, field="project", rule=PROJECT_ID_RULE) from None


async def get_project(
    state: StateDep,
    x_loom_project: Annotated[
        str | None,
        Header(alias="X-Loom-Project", description=f"Project id ({PROJECT_ID_RULE}); default: Weft's own"),
    ] = None,
    project: Annotated[
        str | None, Query(description="Project id; alternative to the X-Loom-Project header")
    ] = None,
) -> ProjectContext:
    return await state.hub.get(choose_project(state, x_loom_project, project))


ProjectDep = Annotated[ProjectContext, Depends(get_project)]

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page size (1-1000)")]
Cursor = Annotated[
    str | None, Query(max_length=2000, description="next_cursor from the previous page, unchanged")
]
