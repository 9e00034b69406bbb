"""Ids as people type them: a full id, the start of one as the tables show it, a work item's
task id or an agent's handle. Weft resolves them by one rule (``shared.refs``, its
``/resolve`` routes); a full id is used as it is, without a request. Shuttle and both
clients resolve through here, so a reference means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from loom.errors import Refused
from loom.transport import WeftClient
from shared.names import is_full_id

Resource = Literal["work", "agents"]

_REF = "ref"
"""The field Weft's ``/resolve`` routes name in a refusal: renamed to the caller's own."""


@contextmanager
def _refusal_named(field: str) -> Iterator[None]:
    """A refusal about ``ref`` raised as one about ``field``; any other passes as it is."""
    try:
        yield
    except Refused as exc:
        details = exc.details if isinstance(exc.details, dict) else None
        if details is None or details.get("field") != _REF:
            raise
        message = field + exc.message.removeprefix(_REF)
        raise Refused(
            message, status=exc.status, code=exc.code, details={**details, "field": field}
        ) from None


def resolve(client: WeftClient, resource: Resource, ref: str, field: str) -> str:
    """The full id of the record ``ref`` names (``GET /api/<resource>/resolve``)."""
    if is_full_id(ref):
        return ref
    with _refusal_named(field):
        return str(client.get(f"/api/{resource}/resolve", ref=ref)["id"])


Request = Callable[..., Awaitable[Any]]
"""``AsyncLoomClient.request``: ``(method, path, *, params=...)``."""


async def resolve_async(request: Request, resource: Resource, ref: str, field: str) -> str:
    """:func:`resolve` for an asyncio client."""
    if is_full_id(ref):
        return ref
    with _refusal_named(field):
        return str((await request("GET", f"/api/{resource}/resolve", params={"ref": ref}))["id"])


def work_id(client: WeftClient, ref: str, field: str = "work_id") -> str:
    """The work item ``ref`` names: its id, its task id or a unique id prefix."""
    return resolve(client, "work", ref, field)


def agent_id(client: WeftClient, ref: str, field: str = "agent_id") -> str:
    """The agent ``ref`` names: its id, its handle or a unique id prefix."""
    return resolve(client, "agents", ref, field)
