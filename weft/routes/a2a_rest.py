"""``/a2a/{project}/...``: A2A 1.0's HTTP+JSON binding of each project (docs/a2a.md).

The same agent as the JSON-RPC endpoint at ``/a2a/{project}``: Weft's dependencies check
the token (``401``), the project (``400``) and the query (declared here, so Weft's strict
query check and validation apply); then the SDK's REST dispatcher takes the request and
calls the one :class:`~weft.a2a.handler.LoomRequestHandler`. A body that is not the
operation's A2A message is refused here, before the SDK parses it, so its parser's text
(which can quote the input) never reaches the client; the SDK's own errors pass through
:func:`weft.a2a.errors.scrub_rest`.
"""

from __future__ import annotations

from typing import Annotated, Final

from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.rest_dispatcher import RestDispatcher
from a2a.types import SendMessageRequest, TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from google.protobuf.json_format import Parse, ParseError
from google.protobuf.message import Message as ProtoMessage

from weft.a2a.errors import field_error, rest_refusal, scrub_rest, translate
from weft.a2a.mapping import A2AInvalid, check_state_filter
from weft.deps import ScopeDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.a2a import LoomContextBuilder, ProjectHeader, ProjectPath, serve
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    tags=["a2a"], dependencies=[STRICT_QUERY, Depends(require_token)], responses=ERROR_RESPONSES
)

BINDING: Final = "HTTP+JSON"
PREFIX: Final = "/a2a/{project}"

HistoryLength = Annotated[int | None, Query(alias="historyLength", ge=0, le=1000)]


def create_rest_dispatcher(handler: RequestHandler) -> RestDispatcher:
    return RestDispatcher(handler, context_builder=LoomContextBuilder())


def _rest(request: Request) -> RestDispatcher:
    dispatcher: RestDispatcher = request.app.state.a2a_rest
    return dispatcher


async def _body_of(request: Request, message: type[ProtoMessage], what: str) -> Response | None:
    """A refusal when the body is not ``message`` in its JSON form (None: it is)."""
    rule = f"must be the JSON form of an A2A 1.0 {what}"
    try:
        Parse(await request.body(), message(), ignore_unknown_fields=True)
    except (ParseError, ValueError, UnicodeDecodeError):
        return rest_refusal(InvalidParamsError(message=f"body: {rule}", data=field_error("body", rule)))
    return None


async def _served(
    request: Request,
    project: ProjectPath,
    state: StateDep,
    scope: ScopeDep,
    x_loom_project: ProjectHeader = None,
) -> None:
    await serve(request, state, scope, project, x_loom_project)


Served = Annotated[None, Depends(_served)]
"""The route's project and token, set on the request for the SDK's handler."""
TaskId = Annotated[str, Path(description="The task's id (a work item's id)", max_length=200)]
PushId = Annotated[str, Path(description="The push notification configuration's id", max_length=200)]


@router.post(PREFIX + "/message:send", summary="A2A SendMessage (HTTP+JSON)", response_class=Response)
async def send_message(request: Request, _: Served) -> Response:
    refused = await _body_of(request, SendMessageRequest, "SendMessageRequest")
    return refused or scrub_rest(await _rest(request).on_message_send(request))


@router.post(
    PREFIX + "/message:stream",
    summary="A2A SendStreamingMessage (HTTP+JSON, server-sent events)",
    response_class=Response,
)
async def stream_message(request: Request, _: Served) -> Response:
    refused = await _body_of(request, SendMessageRequest, "SendMessageRequest")
    return refused or scrub_rest(await _rest(request).on_message_send_stream(request))


@router.post(PREFIX + "/tasks/{id}:cancel", summary="A2A CancelTask (HTTP+JSON)", response_class=Response)
async def cancel_task(request: Request, _: Served, id: TaskId) -> Response:
    return scrub_rest(await _rest(request).on_cancel_task(request))


async def subscribe_to_task(request: Request, _: Served, id: TaskId) -> Response:
    return scrub_rest(await _rest(request).on_subscribe_to_task(request))


for _method in ("GET", "POST"):  # the binding allows both
    router.add_api_route(
        PREFIX + "/tasks/{id}:subscribe",
        subscribe_to_task,
        methods=[_method],
        summary="A2A SubscribeToTask (HTTP+JSON, server-sent events)",
        response_class=Response,
        operation_id=f"a2a_subscribe_to_task_{_method.lower()}",
    )


@router.post(
    PREFIX + "/tasks/{id}/pushNotificationConfigs",
    summary="A2A CreateTaskPushNotificationConfig (HTTP+JSON)",
    response_class=Response,
)
async def set_push_config(request: Request, _: Served, id: TaskId) -> Response:
    refused = await _body_of(request, TaskPushNotificationConfig, "TaskPushNotificationConfig")
    return refused or scrub_rest(await _rest(request).set_push_notification(request))


@router.get(
    PREFIX + "/tasks/{id}/pushNotificationConfigs",
    summary="A2A ListTaskPushNotificationConfigs (HTTP+JSON)",
    response_class=Response,
)
async def list_push_configs(
    request: Request,
    _: Served,
    id: TaskId,
    page_size: Annotated[int | None, Query(alias="pageSize", ge=1, le=1000)] = None,
    page_token: Annotated[str | None, Query(alias="pageToken", max_length=2000)] = None,
) -> Response:
    return scrub_rest(await _rest(request).list_push_notifications(request))


@router.get(
    PREFIX + "/tasks/{id}/pushNotificationConfigs/{push_id}",
    summary="A2A GetTaskPushNotificationConfig (HTTP+JSON)",
    response_class=Response,
)
async def get_push_config(request: Request, _: Served, id: TaskId, push_id: PushId) -> Response:
    return scrub_rest(await _rest(request).get_push_notification(request))


@router.delete(
    PREFIX + "/tasks/{id}/pushNotificationConfigs/{push_id}",
    summary="A2A DeleteTaskPushNotificationConfig (HTTP+JSON)",
    response_class=Response,
)
async def delete_push_config(request: Request, _: Served, id: TaskId, push_id: PushId) -> Response:
    return scrub_rest(await _rest(request).delete_push_notification(request))


@router.get(PREFIX + "/tasks/{id}", summary="A2A GetTask (HTTP+JSON)", response_class=Response)
async def get_task(request: Request, _: Served, id: TaskId, history_length: HistoryLength = None) -> Response:
    return scrub_rest(await _rest(request).on_get_task(request))


@router.get(PREFIX + "/tasks", summary="A2A ListTasks (HTTP+JSON)", response_class=Response)
async def list_tasks(
    request: Request,
    _: Served,
    context_id: Annotated[str | None, Query(alias="contextId", max_length=200)] = None,
    status: Annotated[str | None, Query(max_length=64)] = None,
    page_size: Annotated[int | None, Query(alias="pageSize", ge=1, le=1000)] = None,
    page_token: Annotated[str | None, Query(alias="pageToken", max_length=2000)] = None,
    history_length: HistoryLength = None,
    status_timestamp_after: Annotated[str | None, Query(alias="statusTimestampAfter", max_length=64)] = None,
    include_artifacts: Annotated[bool | None, Query(alias="includeArtifacts")] = None,
) -> Response:
    if status is not None:
        try:
            check_state_filter(status)
        except A2AInvalid as exc:
            return rest_refusal(translate(exc))
    return scrub_rest(await _rest(request).list_tasks(request))


@router.get(
    PREFIX + "/extendedAgentCard",
    summary="A2A GetExtendedAgentCard (HTTP+JSON)",
    response_class=Response,
)
async def extended_card(request: Request, _: Served) -> Response:
    return scrub_rest(await _rest(request).handle_authenticated_agent_card(request))
