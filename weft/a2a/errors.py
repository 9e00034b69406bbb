"""Loom's refusals as A2A (JSON-RPC) errors, and the no-echo rule over the SDK's own.

Every anticipated refusal is a :class:`~shared.errors.LoomError`; here it becomes the
A2A error of its kind, with the field named the way the SDK names fields
(``data.errors = [{"field", "message"}]``, which its JSON-RPC layer renders as a
``google.rpc.BadRequest`` field violation). The SDK builds a few errors itself
(unparseable params, an unknown version, an unexpected exception) from library
messages that can quote the rejected input; :func:`scrub` replaces those texts
before the response leaves Weft.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from a2a.utils.constants import A2A_JSON_MEDIA_TYPE
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
)
from starlette.responses import JSONResponse, Response

from shared.errors import Conflict, Forbidden, LoomError, NotFound, Problem
from shared.nats.failures import NatsUnavailable, nats_failure
from shared.redact import redact
from weft.a2a.mapping import A2AInvalid, A2AMediaTypeUnsupported

log = logging.getLogger("loom.weft.a2a")

INTERNAL_MESSAGE: Final = "Weft failed to handle this request; see its log"
NATS_MESSAGE: Final = "NATS is unavailable (it did not answer, or cannot be reached now); try again shortly"
PARAMS_RULE: Final = "must match the A2A schema of this method"
ENVELOPE_MESSAGE: Final = "request: must be one JSON-RPC 2.0 request object (jsonrpc, method, id, params)"
VERSION_MESSAGE: Final = (
    "A2A-Version: this endpoint speaks A2A 1.0 (send A2A-Version: 1.0) and the 0.3 method names"
)
REST_VERSION_MESSAGE: Final = "A2A-Version: the HTTP+JSON binding speaks A2A 1.0 (send A2A-Version: 1.0)"
GRPC_VERSION_MESSAGE: Final = "a2a-version: the gRPC binding speaks A2A 1.0 (send a2a-version: 1.0)"

_INTERNAL_CODE: Final = -32603
_INVALID_PARAMS_CODE: Final = -32602
_INVALID_REQUEST_CODE: Final = -32600
_VERSION_CODE: Final = -32009


def field_errors(problems: list[Problem]) -> dict[str, Any]:
    """``A2AError.data`` naming the fields at fault, as the SDK's own validation does."""
    return {"errors": [{"field": p.field, "message": p.message} for p in problems]}


def field_error(name: str, rule: str) -> dict[str, Any]:
    return field_errors([Problem(field=name, message=rule, type="value_error")])


A2A_FIELD: Final = {"work_id": "id"}
"""Loom's field names as the A2A caller knows them (a work id is a task's ``id``)."""


def _a2a_named(exc: LoomError) -> None:
    name = A2A_FIELD.get(exc.field or "")
    if name is not None and exc.field is not None:
        if exc.message.startswith(f"{exc.field}:"):
            exc.message = name + exc.message[len(exc.field) :]
        exc.field = name


def translate(exc: Exception, *, conflict: type[A2AError] = InvalidRequestError) -> A2AError:
    """The A2A error for ``exc``: a refusal keeps its message (field and rule, no value);
    anything else is logged and answered without its text. ``conflict``: the error a
    state conflict means for this method (``TaskNotCancelableError`` for a cancel)."""
    if isinstance(exc, A2AError):
        return exc
    if isinstance(exc, A2AMediaTypeUnsupported):
        return ContentTypeNotSupportedError(message=redact(exc.message), data=field_errors(exc.problems))
    if isinstance(exc, A2AInvalid):
        return InvalidParamsError(message=redact(exc.message), data=field_errors(exc.problems))
    nats = nats_failure(exc)  # before LoomError: a JetStream reply error is one, but NATS's fault
    if isinstance(nats, NatsUnavailable):
        log.warning("NATS unavailable while serving an A2A request: %s", type(exc).__name__)
        return InternalError(message=NATS_MESSAGE)
    if nats is not None:
        log.error("JetStream refused an operation of an A2A request: %s", redact(exc))
        return InternalError(message=INTERNAL_MESSAGE)
    if isinstance(exc, LoomError):
        _a2a_named(exc)
        message = redact(exc.message)
        data = (
            field_errors([Problem(field=exc.field, message=exc.rule or message, type=exc.code)])
            if exc.field
            else None
        )
        if isinstance(exc, NotFound):
            return TaskNotFoundError(message=message, data=data)
        if isinstance(exc, Conflict):
            return conflict(message=message, data=data)
        if isinstance(exc, Forbidden):
            return InvalidRequestError(message=message, data=data)
        if exc.code in ("invalid", "invalid_project", "invalid_cursor"):
            return InvalidParamsError(message=message, data=data)
        return InternalError(message=message, data=data)
    log.error("unhandled error in an A2A request: %s", redact(exc), exc_info=exc)
    return InternalError(message=INTERNAL_MESSAGE)


def _ours(detail: Mapping[str, Any]) -> bool:
    """An error detail Weft wrote (field errors), as opposed to the SDK's parse notes."""
    metadata = detail.get("metadata")
    return not (isinstance(metadata, Mapping) and "parseError" in metadata)


def scrub_error(error: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error object without the SDK's quotes of the input (see module doc)."""
    code = error.get("code")
    data = error.get("data")
    if code == _INTERNAL_CODE and error.get("message") not in (INTERNAL_MESSAGE, NATS_MESSAGE):
        return {"code": code, "message": INTERNAL_MESSAGE}
    if code == _VERSION_CODE:
        return {"code": code, "message": VERSION_MESSAGE}
    if code == _INVALID_REQUEST_CODE and isinstance(data, str):
        # The 0.3 adapter validates a request whose envelope the dispatcher already accepted,
        # so what failed is its params: -32602, as the 1.0 methods answer it.
        return {"code": _INVALID_PARAMS_CODE, "message": f"params: {PARAMS_RULE}"}
    if code == _INVALID_REQUEST_CODE and isinstance(data, Mapping) and "parseError" in data:
        return {"code": code, "message": ENVELOPE_MESSAGE}
    if code == _INVALID_PARAMS_CODE and (
        isinstance(data, str)
        or (isinstance(data, list) and not all(isinstance(d, Mapping) and _ours(d) for d in data))
    ):
        return {"code": code, "message": f"params: {PARAMS_RULE}"}
    return error


def scrub(response: Response) -> Response:
    """``response`` as it leaves Weft: any JSON-RPC error passed through :func:`scrub_error`,
    and a success without a result given ``"result": null`` (the 0.3 adapter drops a null
    result, as a delete's, and a JSON-RPC response must carry one or an error)."""
    if not isinstance(response, JSONResponse):
        return response
    try:
        body = json.loads(bytes(response.body))
    except ValueError:
        return response
    if not isinstance(body, dict):
        return response
    error = body.get("error")
    if error is None and "result" not in body:
        return JSONResponse({**body, "result": None}, status_code=response.status_code)
    if not isinstance(error, dict):
        return response
    cleaned = scrub_error(error)
    if cleaned is error:
        return response
    return JSONResponse({**body, "error": cleaned}, status_code=response.status_code)


SPEC_HTTP_STATUS: Final = {
    "TASK_NOT_CANCELABLE": 409,
    "CONTENT_TYPE_NOT_SUPPORTED": 415,
    "INVALID_AGENT_RESPONSE": 502,
}
"""The HTTP status A2A 1.0 maps these errors to (its §5.4) where the SDK answers 400, 400
and 500; by ``details[0].reason``."""


def _reason(error: Mapping[str, Any]) -> str | None:
    details = error.get("details") or [{}]
    reason = details[0].get("reason") if isinstance(details[0], Mapping) else None
    return reason if isinstance(reason, str) else None


def _rest_answer(error: dict[str, Any]) -> JSONResponse:
    """The binding's error response for ``error`` (its ``code`` is the HTTP status), with
    the specification's status where the SDK's differs."""
    status = SPEC_HTTP_STATUS.get(_reason(error) or "", int(error["code"]))
    body = {"error": {**error, "code": status}}
    return JSONResponse(body, status_code=status, media_type=A2A_JSON_MEDIA_TYPE)


def rest_refusal(error: A2AError) -> JSONResponse:
    """``error`` in the HTTP+JSON binding's shape (``{"error": {code, status, message,
    details}}``, the status the protocol maps it to)."""
    return _rest_answer(build_rest_error_payload(error)["error"])


def scrub_rest(response: Response) -> Response:
    """An HTTP+JSON answer as it leaves Weft: the SDK's version refusal (which quotes the
    header) and an unexpected failure's text replaced, as :func:`scrub_error` does for
    JSON-RPC; everything Weft wrote passes unchanged."""
    if not isinstance(response, JSONResponse) or response.status_code < 400:
        return response
    try:
        body = json.loads(bytes(response.body))
    except ValueError:
        return response
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return response
    reason = _reason(error)
    if reason == "VERSION_NOT_SUPPORTED":
        only_reason = [{**error["details"][0], "metadata": {}}]
        return _rest_answer({**error, "message": REST_VERSION_MESSAGE, "details": only_reason})
    if error["code"] == 500 and error.get("message") not in (INTERNAL_MESSAGE, NATS_MESSAGE):
        return _rest_answer({"code": 500, "status": "INTERNAL", "message": INTERNAL_MESSAGE})
    if reason in SPEC_HTTP_STATUS:
        return _rest_answer(error)
    return response
