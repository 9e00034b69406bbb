"""One error envelope for every failure: ``{"error": code, "message": ..., "details": ...}``.

Every anticipated failure is a :class:`shared.errors.LoomError` and goes
through one handler: the status comes from its ``code`` (:data:`STATUS_FOR_CODE`),
``details`` names its field (and rule). Caller mistakes are 4xx and name the
field and the rule without repeating the rejected value; anything that is
Weft's or NATS's fault is 5xx with a message that carries no secret. A NATS
failure is what :func:`shared.nats.failures.nats_failure` makes of it, as in
every part: 503 with ``nats_unavailable`` or ``jetstream_error``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from nats.errors import Error as NatsError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.errors import LoomError, safe_loc, validation_problems
from shared.errors import error_details as field_details
from shared.legacy import rest_advice
from shared.nats.failures import JETSTREAM_ERROR, NATS_UNAVAILABLE, NatsUnavailable, nats_failure
from shared.nats.jsapi import JetStreamReplyError
from shared.redact import redact

log = logging.getLogger("loom.weft")

STATUS_FOR_CODE: dict[str, int] = {
    "invalid": 400,
    "invalid_cursor": 400,
    "invalid_project": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "spinup_unavailable": 409,
    "workstream_failed": 409,
    "workstream_drift": 409,
    "git_failed": 502,
    "validation_error": 422,
    "unavailable": 503,
    "too_many_requests": 429,
    NATS_UNAVAILABLE: 503,
    JETSTREAM_ERROR: 503,
}
"""HTTP status of each error code; an unlisted code is a 400."""

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

NATS_RETRY = "Try again shortly."
"""Weft's advice on a NATS failure that may pass (it reconnects by itself)."""
NATS_RETRY_AFTER_S = "1"
"""``Retry-After`` on a ``nats_unavailable`` answer: a time-out under load or a reconnect
usually clears within a second."""

_LOCATIONS = ("body", "query", "path", "header", "cookie")


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


class ApiError(LoomError):
    """A refusal only the HTTP layer makes (auth, the project header, request
    validation): it can carry its own ``details`` and response ``headers``."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        rule: str | None = None,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, field=field, rule=rule, code=code)
        self.details = details
        self.headers = headers


def http_status(exc: LoomError) -> int:
    return STATUS_FOR_CODE.get(exc.code, 400)


def error_details(exc: LoomError) -> Any:
    if isinstance(exc, ApiError) and exc.details is not None:
        return exc.details
    return field_details(exc)


def error_body(exc: LoomError) -> ErrorBody:
    """The envelope of ``exc`` (also used for the failed entries of batch routes)."""
    return ErrorBody(error=exc.code, message=redact(exc.message), details=error_details(exc))


def render(exc: LoomError) -> JSONResponse:
    headers = exc.headers if isinstance(exc, ApiError) else None
    return JSONResponse(status_code=http_status(exc), content=error_body(exc).model_dump(), headers=headers)


def envelope(status: int, code: str, message: str, details: Any = None, **kw: Any) -> JSONResponse:
    body = {"error": code, "message": redact(message), "details": details}
    return JSONResponse(status_code=status, content=body, **kw)


def problems_from(errors: Sequence[Any], *, default_location: str | None = None) -> list[FieldProblem]:
    """Field problems from pydantic errors, never echoing the rejected input (it may hold a secret)."""
    out: list[FieldProblem] = []
    for err in errors:
        loc = tuple(err.get("loc") or ())
        if default_location is not None:
            loc = (default_location, *loc)
        location = loc[0] if loc and loc[0] in _LOCATIONS else "body"
        rest = loc[1:] if loc and loc[0] == location else loc
        advice = rest_advice(rest[-1]) if err.get("type") == "extra_forbidden" and rest else None
        if err.get("type") == "json_invalid":  # loc holds a character offset, not a field
            field, message = "body", f"not valid JSON (at character {loc[-1] if loc else 0})"
        elif advice is not None:  # one of the TypeScript Weft's names: ours to show, with ours
            field = ".".join(str(part) for part in (*safe_loc(rest[:-1]), rest[-1]))
            message = advice
        else:
            problem = validation_problems([{**err, "loc": rest}])[0]
            field, message = (problem.field if rest else location), problem.message
        out.append(
            FieldProblem(field=field, location=location, message=redact(message), type=err.get("type", ""))
        )
    return out


def validation_error(problems: list[FieldProblem]) -> ApiError:
    summary = "; ".join(f"{p.field}: {p.message}" for p in problems[:5])
    if len(problems) > 5:
        summary += f"; and {len(problems) - 5} more"
    return ApiError(
        "validation_error",
        summary or "invalid request",
        details={"errors": [p.model_dump() for p in problems]},
    )


def from_pydantic(exc: ValidationError, location: str = "body") -> ApiError:
    return validation_error(problems_from(exc.errors(), default_location=location))


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the envelope."""

    async def refused(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, LoomError)
        return render(exc)

    async def request_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return render(validation_error(problems_from(exc.errors())))

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _CODE_FOR_STATUS.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return envelope(exc.status_code, code, message, headers=getattr(exc, "headers", None))

    async def nats_failed(_: Request, exc: Exception) -> JSONResponse:
        found = nats_failure(exc, retry=NATS_RETRY)
        if found is None:  # a NATS error no part anticipates: a bug, answered by ``unexpected``
            raise exc
        response = render(found)
        if isinstance(found, NatsUnavailable):
            log.warning("NATS unavailable while serving a request: %s", redact(type(exc).__name__))
            response.headers["Retry-After"] = NATS_RETRY_AFTER_S  # loom.retry asks reads again
        else:
            log.error("JetStream refused an operation: %s", redact(exc))
        return response

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", redact(exc))
        return envelope(500, "internal", "Weft failed to handle this request; see its log")

    app.add_exception_handler(LoomError, refused)
    app.add_exception_handler(RequestValidationError, request_validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    # nats-py's errors, a deadline around a NATS call, and our own JetStream replies (a
    # LoomError, but worded by the classifier like nats-py's): shared.nats.failures decides
    for kind in (NatsError, TimeoutError, JetStreamReplyError):
        app.add_exception_handler(kind, nats_failed)
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
