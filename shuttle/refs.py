"""Ids as people type them: a full id, the start of one as the tables show it, a work item's
task id or an agent's handle. Weft resolves them by one rule (``shared.refs``); a full id
is used as it is, without a request."""

from __future__ import annotations

from loom.errors import Refused
from loom.transport import WeftClient
from shared.names import is_full_id

_REF = "ref"
"""The field Weft's ``/resolve`` routes name in a refusal: renamed to the command's own."""


def _resolve(client: WeftClient, resource: str, ref: str, field: str) -> str:
    if is_full_id(ref):
        return ref
    try:
        found = client.get(f"/api/{resource}/resolve", ref=ref)
    except Refused as exc:
        details = exc.details if isinstance(exc.details, dict) else None
        if details is None or details.get("field") != _REF:
            raise
        message = field + exc.message.removeprefix(_REF)
        raise Refused(
            message, status=exc.status, code=exc.code, details={**details, "field": field}
        ) from None
    return str(found["id"])


def work_id(client: WeftClient, ref: str, field: str = "work_id") -> str:
    """The work item ``ref`` names: its id, its task id or a unique id prefix."""
    return _resolve(client, "work", ref, field)


def agent_id(client: WeftClient, ref: str, field: str = "agent_id") -> str:
    """The agent ``ref`` names: its id, its handle or a unique id prefix."""
    return _resolve(client, "agents", ref, field)
