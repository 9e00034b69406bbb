"""A2A's gRPC binding (docs/a2a.md): the SDK's gRPC servicer over the one request handler,
on a port of its own (``WEFT_A2A_GRPC_PORT``), for every project Weft serves.

gRPC has no project in its address, so the project is the request's ``tenant`` (the card's
gRPC interface names it, and the SDK's client sends it on every call). The bearer token
travels as ``authorization`` metadata; an interceptor refuses a call without a valid one
(``UNAUTHENTICATED``) before any A2A processing, as the HTTP routes answer ``401``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder, GrpcHandler
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2_grpc
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, VERSION_HEADER
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    A2AError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a.utils.grpc_status import status_to_grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from weft.a2a.errors import GRPC_VERSION_MESSAGE
from weft.a2a.handler import SERVED_KEY, ServedByTenant, granted_by
from weft.deps import token_scope, unauthorized_message
from weft.state import WeftState

log = logging.getLogger("loom.weft.a2a.grpc")

if TYPE_CHECKING:  # generic in the stubs only
    Handler = grpc.RpcMethodHandler[Any, Any]
    Context = grpc.aio.ServicerContext[Any, Any]


def _bearer(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else str(value)
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


class _TokenCheck(grpc.aio.ServerInterceptor):
    """Every call carries a valid bearer token, or ends ``UNAUTHENTICATED`` at once."""

    def __init__(self, state: WeftState) -> None:
        self._state = state

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(details)
        given = _bearer(details.invocation_metadata)
        if handler is None or token_scope(self._state, given) is not None:
            return handler
        message = unauthorized_message(given)

        async def refuse_unary(request: Any, context: Context) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        async def refuse_stream(request: Any, context: Context) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            yield  # pragma: no cover - abort raises

        serializers = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(refuse_stream, **serializers)
        return grpc.unary_unary_rpc_method_handler(refuse_unary, **serializers)


class _ContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's call context plus what the handler needs: the token's grants, resolved to
    a project by the request's tenant (:class:`ServedByTenant`)."""

    def __init__(self, state: WeftState, base_url: str) -> None:
        self._state = state
        self._base_url = base_url

    def build(self, context: Context) -> ServerCallContext:
        check_version(context.invocation_metadata())
        call = super().build(context)
        scope = token_scope(self._state, _bearer(context.invocation_metadata()))
        assert scope is not None  # the interceptor refused the call otherwise

        async def gone() -> bool:
            return bool(context.cancelled() or context.done())

        call.state[SERVED_KEY] = ServedByTenant(self._state, gone, granted_by(scope), self._base_url)
        return call


def check_version(metadata: Any) -> None:
    """The call speaks A2A 1.x (``a2a-version``; none means 0.3, which this binding does
    not serve), else :class:`VersionNotSupportedError` before anything is processed."""
    given = next((v for k, v in metadata or () if k.lower() == VERSION_HEADER.lower()), None)
    text = (given.decode(errors="replace") if isinstance(given, bytes) else given) or PROTOCOL_VERSION_0_3
    major = PROTOCOL_VERSION_1_0.partition(".")[0]
    if text.strip().partition(".")[0] != major:  # Major.Minor; any 1.x is served as 1.0
        raise VersionNotSupportedError(message=GRPC_VERSION_MESSAGE)


SPEC_GRPC_STATUS: Final[dict[type[A2AError], grpc.StatusCode]] = {
    PushNotificationNotSupportedError: grpc.StatusCode.UNIMPLEMENTED,
    UnsupportedOperationError: grpc.StatusCode.UNIMPLEMENTED,
    VersionNotSupportedError: grpc.StatusCode.UNIMPLEMENTED,
}
"""The gRPC status A2A 1.0 maps these errors to (its §5.4) where the SDK answers
``FAILED_PRECONDITION``."""


class _Servicer(GrpcHandler):
    """The SDK's servicer, ending a call with the specification's status for every error."""

    async def abort_context(self, error: A2AError, context: Context) -> None:
        code = SPEC_GRPC_STATUS.get(type(error))
        if code is None:
            await super().abort_context(error, context)
            return
        info = any_pb2.Any()
        reason = A2A_ERROR_REASONS[type(error)]
        info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="a2a-protocol.org"))
        status = status_pb2.Status(code=code.value[0], message=error.message, details=[info])
        rich = status_to_grpc(status)
        await context.abort(rich.code, rich.details, trailing_metadata=rich.trailing_metadata)


async def start_grpc(
    state: WeftState, handler: RequestHandler, host: str, port: int, base_url: str
) -> tuple[grpc.aio.Server, int]:
    """Serve the A2A gRPC binding on ``host:port`` (0: a free port); the server and its port."""
    server = grpc.aio.server(interceptors=[_TokenCheck(state)])
    servicer = _Servicer(handler, context_builder=_ContextBuilder(state, base_url))
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    log.info("A2A gRPC binding on %s:%d", host, bound)
    return server, bound
