"""``/api/spinups``: the spin-up operations of a project, newest first (docs/spinup.md).

What the stats count and the ``spinup.*`` events announce one by one, as a listing: the
console's targets view reads it when it opens."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from shared.models import SpinupOperation, SpinupState
from shared.paging import CursorError, decode_cursor, encode_cursor
from weft.deps import Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import HEX32
from weft.schemas import PageOut
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/spinups",
    tags=["targets"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


def _key(op: SpinupOperation) -> tuple[str, str]:
    return (op.created_at.isoformat(), op.id)


@router.get("", response_model=PageOut[SpinupOperation], summary="List spin-ups, newest first")
async def list_spinups(
    project: ProjectDep,
    state: StateDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    target_id: Annotated[str | None, Query(pattern=HEX32, description="Only this target's")] = None,
    state_: Annotated[SpinupState | None, Query(alias="state")] = None,
) -> PageOut[SpinupOperation]:
    after = decode_cursor(cursor)
    if after is not None and not (isinstance(after.get("at"), str) and isinstance(after.get("id"), str)):
        raise CursorError()
    matching = sorted(
        (
            op
            for op in await state.spinup.operations(project)
            if (target_id is None or op.target_id == target_id) and (state_ is None or op.state is state_)
        ),
        key=_key,
        reverse=True,
    )
    total = len(matching)
    if after is not None:
        matching = [op for op in matching if _key(op) < (after["at"], after["id"])]
    page = matching[:limit]
    following = (
        encode_cursor({"at": page[-1].created_at.isoformat(), "id": page[-1].id})
        if len(matching) > limit
        else None
    )
    return PageOut[SpinupOperation](items=page, next_cursor=following, total=total)
