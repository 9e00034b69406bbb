"""Unknown query parameters are refused, not ignored.

FastAPI drops a query parameter a route does not declare, so a misspelt filter
(or one of the TypeScript Weft's: ``?projectId=``, ``?classification=``) would
silently widen the answer to everything. Every HTTP route gets this dependency:
a parameter the route (or one of its dependencies) does not declare is a 422
``validation_error`` naming it, with the name to use instead when it is one of
the original's (:mod:`shared.legacy`). WebSocket routes read their own query.

Each resource module's router lists :data:`STRICT_QUERY` first among its dependencies:
Weft adds those routers' routes to its app as they are (``weft.app``), so nothing
app-wide reaches them.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Depends
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection

from shared.errors import shown_name
from shared.legacy import rest_advice
from weft.errors import FieldProblem, validation_error

_KNOWN: dict[int, frozenset[str]] = {}


def _query_names(dependant: Dependant) -> Iterator[str]:
    for param in dependant.query_params:
        yield param.alias
    for sub in dependant.dependencies:
        yield from _query_names(sub)


def _known(route: APIRoute) -> frozenset[str]:
    known = _KNOWN.get(id(route))
    if known is None:
        known = _KNOWN[id(route)] = frozenset(_query_names(route.dependant))
    return known


async def no_unknown_query(conn: HTTPConnection) -> None:
    if conn.scope.get("type") != "http" or not conn.query_params:
        return
    route = conn.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _known(route)
    unknown = [name for name in conn.query_params if name not in known]
    if unknown:
        raise validation_error([_problem(name, known) for name in dict.fromkeys(unknown)])


def _problem(name: str, known: frozenset[str]) -> FieldProblem:
    advice = rest_advice(name)
    if advice is not None:  # one of the original's names: ours to show
        return FieldProblem(field=name, location="query", message=advice, type="extra_forbidden")
    takes = ", ".join(sorted(known)) or "none"
    message = f"unknown query parameter (this route takes: {takes})"
    return FieldProblem(field=shown_name(name), location="query", message=message, type="extra_forbidden")


STRICT_QUERY = Depends(no_unknown_query)
"""The dependency every resource router lists first, ahead of its token check."""
