"""``/api/mechanisms``: how this Weft can start agents, from the one mechanism registry."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from weft.deps import require_token
from weft.errors import ERROR_RESPONSES
from weft.spinup.mechanisms import MECHANISM_TYPES
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/mechanisms",
    tags=["targets"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


class MechanismInfo(BaseModel):
    name: str
    """What a target's ``mechanism`` field says."""
    config_schema: dict[str, Any]
    """JSON Schema of the mechanism's ``config`` object."""


@router.get("", response_model=list[MechanismInfo], summary="Mechanisms targets can use")
async def list_mechanisms() -> list[MechanismInfo]:
    """Every mechanism this Weft can start agents with, and the settings its ``config`` takes."""
    return [
        MechanismInfo(name=kind.name, config_schema=kind.config_model.model_json_schema())
        for kind in MECHANISM_TYPES
    ]
