"""One error envelope for every failure: ``{"error": code, "message": ..., "details": ...}``.

Caller mistakes are 4xx and name the field and the rule; anything that is
Weft's or NATS's fault is 5xx with a message that carries no secret.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from nats.errors import ConnectionClosedError, NoRespondersError, OutboundBufferLimitError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import APIError as JsApiError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.names import InvalidNameError
from shared.paging import CursorError
from shared.redact import redact
from shared.registry import AgentNotFound
from shared.work import WorkError
from weft.channels import ChannelNotFound
from weft.spinup.base import SpinupError
from weft.targets.store import TargetError

log = logging.getLogger("loom.weft")

_STATUS_FOR_CODE = {
    "invalid": 422,
    "not_found": 404,
    "conflict": 409,
    "forbidden": 403,
}

_CODE_FOR_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_requests",
    503: "unavailable",
}


class ErrorBody(BaseModel):
    """The error envelope every route uses."""

    error: str
    message: str
    details: Any = None


class FieldProblem(BaseModel):
    field: str
    location: str
    message: str
    type: str


class ApiError(Exception):
    """Raised by routes and domain adapters; rendered as the envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


def envelope(status: int, code: str, message: str, details: Any = None, **kw: Any) -> JSONResponse:
    body = {"error": code, "message": redact(message), "details": details}
    return JSONResponse(status_code=status, content=body, **kw)


def _field_name(loc: Sequence[Any]) -> tuple[str, str]:
    """(field, location) from a pydantic ``loc`` such as ("body", "config", "port")."""
    parts = [str(p) for p in loc]
    location = parts[0] if parts and parts[0] in ("body", "query", "path", "header", "cookie") else "body"
    rest = parts[1:] if parts and parts[0] == location else parts
    return (".".join(rest) or location), location


def problems_from(errors: Sequence[Any], *, default_location: str | None = None) -> list[FieldProblem]:
    """Field problems from pydantic errors, never echoing the rejected input (it may hold a secret)."""
    out: list[FieldProblem] = []
    for err in errors:
        loc = tuple(err.get("loc") or ())
        if default_location is not None:
            loc = (default_location, *loc)
        field, location = _field_name(loc)
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "json_invalid":  # loc holds a character offset, not a field
            field, location = "body", "body"
            message = f"not valid JSON (at character {loc[-1] if loc else 0})"
        out.append(
            FieldProblem(field=field, location=location, message=redact(message), type=err.get("type", ""))
        )
    return out


def validation_error(problems: list[FieldProblem]) -> ApiError:
    summary = "; ".join(
        p.message if p.message.startswith(f"{p.field}:") else f"{p.field}: {p.message}" for p in problems[:5]
    )
    if len(problems) > 5:
        summary += f"; and {len(problems) - 5} more"
    return ApiError(
        422,
        "validation_error",
        summary or "invalid request",
        {"errors": [p.model_dump() for p in problems]},
    )


def from_pydantic(exc: ValidationError, location: str = "body") -> ApiError:
    return validation_error(problems_from(exc.errors(), default_location=location))


def work_error(exc: WorkError) -> ApiError:
    status = _STATUS_FOR_CODE.get(exc.code, 400)
    details = {"field": exc.field} if exc.field else None
    return ApiError(status, exc.code, exc.message, details)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the envelope."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return envelope(exc.status, exc.code, exc.message, exc.details, headers=exc.headers)

    async def request_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        err = validation_error(problems_from(exc.errors()))
        return envelope(err.status, err.code, err.message, err.details)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _CODE_FOR_STATUS.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return envelope(exc.status_code, code, message, headers=getattr(exc, "headers", None))

    async def work_failure(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, WorkError)
        err = work_error(exc)
        return envelope(err.status, err.code, err.message, err.details)

    async def bad_cursor(_: Request, exc: Exception) -> JSONResponse:
        return envelope(400, "invalid_cursor", str(exc), {"field": "cursor"})

    async def bad_name(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InvalidNameError)
        return envelope(400, "invalid", str(exc), {"field": exc.field, "rule": exc.rule})

    async def unknown_agent(_: Request, exc: Exception) -> JSONResponse:
        return envelope(404, "not_found", str(exc), {"field": "agent_id"})

    async def nats_down(_: Request, exc: Exception) -> JSONResponse:
        log.warning("NATS unavailable while serving a request: %s", redact(type(exc).__name__))
        return envelope(503, "nats_unavailable", "NATS did not answer in time; try again shortly")

    async def js_failure(_: Request, exc: Exception) -> JSONResponse:
        log.error("JetStream refused an operation: %s", redact(exc))
        return envelope(503, "jetstream_error", "JetStream refused the operation; see the Weft log")

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", redact(exc))
        return envelope(500, "internal", "Weft failed to handle this request; see its log")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, request_validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(WorkError, work_failure)
    app.add_exception_handler(CursorError, bad_cursor)
    app.add_exception_handler(InvalidNameError, bad_name)
    app.add_exception_handler(AgentNotFound, unknown_agent)
    for kind in (NatsTimeoutError, ConnectionClosedError, NoRespondersError, OutboundBufferLimitError):
        app.add_exception_handler(kind, nats_down)
    app.add_exception_handler(JsApiError, js_failure)

    async def target_failure(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, TargetError)
        return envelope(exc.status, exc.code, exc.message, {"field": exc.field} if exc.field else None)

    async def spinup_failure(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SpinupError)
        return envelope(exc.status, exc.code, exc.message, {"field": exc.field} if exc.field else None)

    async def no_channel(_: Request, exc: Exception) -> JSONResponse:
        return envelope(404, "not_found", str(exc), {"field": "channel"})

    app.add_exception_handler(TargetError, target_failure)
    app.add_exception_handler(SpinupError, spinup_failure)
    app.add_exception_handler(ChannelNotFound, no_channel)
    app.add_exception_handler(Exception, unexpected)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (400, "Bad request (invalid project, cursor or name)"),
        (401, "Missing or invalid bearer token"),
        (404, "Not found"),
        (409, "Conflict with the current state"),
        (422, "Validation error naming the field"),
        (503, "NATS unavailable"),
    )
}
"""Documented on every /api route so /openapi.json states the error contract."""
