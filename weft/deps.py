"""FastAPI dependencies shared by every route: state, auth, project, paging."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Query
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from shared.names import PROJECT_ID_RULE, InvalidNameError, validate_project_id
from weft.errors import ApiError
from weft.project.hub import ProjectContext
from weft.state import WeftState
from weft.tokens import ApiScope, missing_scope_message, scope_of

MAX_PAGE = 1000

HOW_REST = "Authorization: Bearer <token>"
HOW_WS = "Sec-WebSocket-Protocol: bearer, <token>; or ?token=<token>; or Authorization: Bearer <token>"
UNAUTHORIZED_MESSAGE = f"a bearer token is required and none was given ({HOW_REST})"
REJECTED_MESSAGE = f"the bearer token given is not one this Weft accepts ({HOW_REST}; one of WEFT_API_TOKENS)"
WS_UNAUTHORIZED_MESSAGE = f"a token is required and none was given ({HOW_WS})"
WS_REJECTED_MESSAGE = f"the token given is not one this Weft accepts ({HOW_WS}; one of WEFT_API_TOKENS)"


def unauthorized_message(given: str | None, *, websocket: bool = False) -> str:
    """No token and a token Weft does not know are told apart (a person fixes each differently:
    set one, or check which one is set)."""
    if given:
        return WS_REJECTED_MESSAGE if websocket else REJECTED_MESSAGE
    return WS_UNAUTHORIZED_MESSAGE if websocket else UNAUTHORIZED_MESSAGE


_bearer = HTTPBearer(auto_error=False, description="One of the tokens in WEFT_API_TOKENS")


def get_state(connection: HTTPConnection) -> WeftState:
    state: WeftState = connection.app.state.weft
    return state


StateDep = Annotated[WeftState, Depends(get_state)]


def token_scope(state: WeftState, given: str | None) -> ApiScope | None:
    """The scope ``given`` carries (None: not a valid token); see :mod:`weft.tokens`."""
    return scope_of(state.settings.api_tokens, given)


async def request_scope(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiScope:
    """The scope of the request's bearer token; 401 without a valid one."""
    given = credentials.credentials if credentials else None
    scope = token_scope(state, given)
    if scope is None:
        raise ApiError("unauthorized", unauthorized_message(given), headers={"WWW-Authenticate": "Bearer"})
    return scope


ScopeDep = Annotated[ApiScope, Depends(request_scope)]


def check_scope(held: ApiScope, needed: ApiScope) -> None:
    """403 naming the scope ``needed`` when ``held`` is lower."""
    if held < needed:
        raise ApiError("forbidden", missing_scope_message(needed, held), field="scope", rule=needed.label)


async def require_token(scope: ScopeDep) -> None:
    """Any valid token (the ``read`` scope): every router's own dependency."""
    check_scope(scope, ApiScope.READ)


async def require_operate(scope: ScopeDep) -> None:
    check_scope(scope, ApiScope.OPERATE)


async def require_admin(scope: ScopeDep) -> None:
    check_scope(scope, ApiScope.ADMIN)


OPERATE = [Depends(require_operate)]
"""``dependencies=OPERATE`` on a route that changes work (submit, cancel, retry, answer)."""
ADMIN = [Depends(require_admin)]
"""``dependencies=ADMIN`` on a route that decides what runs where or stops agents."""


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
