"""``POST /hooks/github``: GitHub's webhook for forge mode (docs/landing.md, Forge mode).

GitHub cannot send Weft's bearer token; each delivery is signed instead
(``X-Hub-Signature-256``, an HMAC of the body with the hook's secret,
``WEFT_GITHUB_WEBHOOK_SECRET``), and nothing is read or touched before the signature is
checked, the project included. A closed pull request settles the items waiting on it at
once (weft/project/forge.py, ``hear``); every other event is acknowledged and ignored.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, status
from pydantic import BaseModel, Field

from shared.git.forge import EVENT_HEADER, SIGNATURE_HEADER, closed_pull_request
from shared.names import PROJECT_ID_RULE
from shared.signing import signed
from weft.deps import StateDep, choose_project
from weft.errors import ERROR_RESPONSES, ApiError
from weft.project.forge import hear
from weft.strictquery import STRICT_QUERY

router = APIRouter(tags=["forge"], responses=ERROR_RESPONSES, dependencies=[STRICT_QUERY])


class HookOut(BaseModel):
    event: str = Field(description="GitHub's event name (X-GitHub-Event)")
    settled: int = Field(description="Items it settled (a closed pull request they waited on)")


@router.post(
    "/hooks/github",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=HookOut,
    summary="GitHub's webhook (forge mode)",
)
async def github_hook(
    request: Request,
    state: StateDep,
    event: Annotated[str, Header(alias=EVENT_HEADER, max_length=100, description="GitHub's event name")],
    signature: Annotated[
        str | None,
        Header(alias=SIGNATURE_HEADER, max_length=200, description="sha256=<HMAC-SHA256 of the body>"),
    ] = None,
    project: Annotated[
        str | None, Query(description=f"The project the hook is for ({PROJECT_ID_RULE}); default: Weft's own")
    ] = None,
) -> HookOut:
    """Configure it on GitHub with content type ``application/json``, the secret of
    ``WEFT_GITHUB_WEBHOOK_SECRET`` and the *Pull requests* event; ``?project=`` names the
    project. Off (404) while no secret is set."""
    secret = state.settings.github_webhook_secret
    if secret is None:
        raise ApiError(
            "not_found",
            "GitHub's webhook is off here: WEFT_GITHUB_WEBHOOK_SECRET is not set",
            field=SIGNATURE_HEADER,
        )
    project_id = choose_project(state, None, project)
    body = await request.body()
    if not signed(secret.get_secret_value(), body, signature):
        raise ApiError(
            "unauthorized",
            f"{SIGNATURE_HEADER}: must be sha256= and the HMAC-SHA256 of the body with the hook's secret",
            field=SIGNATURE_HEADER,
            rule="signature",
        )
    heard = closed_pull_request(event, body)
    if heard is None:
        return HookOut(event=event, settled=0)
    context = await state.hub.get(project_id)
    settled = await hear(context.work, context.repository, context.queue, *heard)
    return HookOut(event=event, settled=settled)
