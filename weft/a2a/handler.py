"""The A2A request handler: each A2A method is an adapter over the project's work queue.

The SDK's JSON-RPC layer (``a2a.server.routes.JsonRpcDispatcher``) parses requests,
checks the protocol version, serves the 0.3 method names and writes responses and
server-sent events; it calls this :class:`~a2a.server.request_handlers.RequestHandler`.
The SDK's default handler runs an agent inside the server and keeps the task in a
store it writes itself; a Loom task is run by the fleet and its record is written by
whoever moves it (Weft, or the Warp agent that claimed it), so this handler keeps no
task state at all: a task is derived from the work record each time (``mapping.task_of``),
a stream follows the project's one events consumer (``EventRelay``). What lives in
memory is one relay listener per open stream or waiting ``SendMessage``; any replica
serves any task, and a stream cut by a restart is resumed with ``SubscribeToTask``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC
from enum import StrEnum
from typing import Any, Final, TypeVar, cast

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler, validate_request_params
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length

from shared.errors import Forbidden
from shared.models import WorkItem, WorkStatus, new_id
from shared.names import InvalidNameError, validate_project_id, validate_work_id
from shared.paging import decode_cursor
from shared.work.rules import WorkNotFound, page_items
from weft.a2a.card import agent_card
from weft.a2a.errors import field_error, translate
from weft.a2a.mapping import (
    A2A_ANSWERED_BY,
    SUBMITTED_BY,
    StreamEvent,
    StreamTranslator,
    check_state_filter,
    context_id_of,
    is_terminal,
    item_of_event,
    reply_of,
    state_of,
    submission_of,
    task_of,
    text_of_parts,
)
from weft.a2a.push import check_url, push_of, without_secrets
from weft.project.hub import ProjectContext
from weft.project.relay import Listener
from weft.state import WeftState
from weft.tokens import ApiScope

SERVED_KEY: Final = "loom_served"
"""Key of ``ServerCallContext.state`` under which the route leaves the :class:`Served`."""
DISCONNECT_CHECK_S: Final = 5.0
"""How often a waiting ``SendMessage`` looks whether its caller is still there."""
DEFAULT_PAGE: Final = 50
MAX_PAGE: Final = 100
SEND_PUSH_URL: Final = "configuration.taskPushNotificationConfig.url"
"""Where a webhook given with a message is named in refusals."""


class Access(StrEnum):
    """What a method does with the project: the token scope it needs (issue 24's scopes)."""

    READ = "read"
    OPERATE = "operate"


@dataclass
class Served:
    """What the route established before the SDK took the request: a valid token, the
    project of the URL, and what the token may do there."""

    project: ProjectContext
    weft: WeftState
    disconnected: Callable[[], Awaitable[bool]]
    granted: frozenset[Access] = field(default_factory=lambda: frozenset(Access))
    base_url: str = ""
    """Weft's address as the client reaches it (for the extended card)."""

    def allow(self, access: Access) -> None:
        if access not in self.granted:
            raise Forbidden(f"this token may not {access.value} in this project")


def granted_by(scope: ApiScope) -> frozenset[Access]:
    """What a token of ``scope`` may do through A2A: read with any, send and cancel with operate."""
    return frozenset({Access.READ, *([Access.OPERATE] if scope >= ApiScope.OPERATE else [])})


@dataclass
class ServedByTenant:
    """A binding without a project in its address (gRPC): the project is the request's
    ``tenant``, which the card's gRPC interface names; the token was checked already."""

    weft: WeftState
    disconnected: Callable[[], Awaitable[bool]]
    granted: frozenset[Access]
    base_url: str

    async def of(self, tenant: str) -> Served:
        if not tenant:
            rule = "required over gRPC: the project, as the card's gRPC interface names it"
            raise InvalidParamsError(message=f"tenant: {rule}", data=field_error("tenant", rule))
        project = await self.weft.hub.get(validate_project_id(tenant, "tenant"))
        return Served(project, self.weft, self.disconnected, self.granted, self.base_url)


async def served(context: ServerCallContext, tenant: str, access: Access) -> Served:
    """The request's project, checked for ``access``; a ``tenant`` (A2A 1.0), if the client
    sends one, must name the project of the URL (the card advertises it as the tenant)."""
    found = context.state.get(SERVED_KEY)
    if isinstance(found, ServedByTenant):
        found = await found.of(tenant)
    if not isinstance(found, Served):
        raise RuntimeError("A2A request without its project (the route did not set it)")
    found.allow(access)
    if tenant and tenant != found.project.project_id:
        raise InvalidParamsError(
            message="tenant: must be the project of this endpoint's URL (or left out)",
            data=field_error("tenant", "must be the project of this endpoint's URL (or left out)"),
        )
    return found


GET_PUSH_0_3: Final = "tasks/pushNotificationConfig/get"
"""The 0.3 name of the push configuration read, whose configuration id is optional."""


def work_id_of(value: str, name: str = "id") -> str:
    """The work id a task id names. A task id is opaque to a client: one of another shape than
    Loom's names no task here, which A2A answers as task-not-found (-32001), not as bad params."""
    try:
        return validate_work_id(value, name)
    except InvalidNameError as exc:
        rule = f"no task with this id in this project (its task ids are {exc.rule})"
        raise TaskNotFoundError(message=f"{name}: {rule}", data=field_error(name, rule)) from None


F = TypeVar("F", bound=Callable[..., Any])


def refusals(conflict: type[A2AError] = UnsupportedOperationError) -> Callable[[F], F]:
    """Every exception of the method leaves as an A2A error (:func:`weft.a2a.errors.translate`),
    for plain coroutines and for streams alike."""

    def wrap(method: F) -> F:
        if inspect.isasyncgenfunction(method):

            @functools.wraps(method)
            async def stream(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
                inner = method(*args, **kwargs)
                try:
                    async for event in inner:
                        yield event
                except Exception as exc:
                    raise translate(exc, conflict=conflict) from None
                finally:
                    await inner.aclose()

            return cast(F, stream)

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            except Exception as exc:
                raise translate(exc, conflict=conflict) from None

        return cast(F, call)

    return wrap


def _work_events(kind: str) -> bool:
    return kind == "work"


class LoomRequestHandler(RequestHandler):
    """A2A 1.0 (and, through the SDK's adapter, 0.3) over Loom work; see the module doc."""

    def __init__(self, *, default_capability: str | None = None) -> None:
        self.default_capability = default_capability

    # -- tasks -------------------------------------------------------------------------

    @validate_request_params
    @refusals()
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        project = (await served(context, params.tenant, Access.READ)).project
        validate_history_length(params)
        item = await project.queue.get(work_id_of(params.id))
        return apply_history_length(task_of(item), params)

    @validate_request_params
    @refusals()
    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        project = (await served(context, params.tenant, Access.READ)).project
        validate_history_length(params)
        size = params.page_size if params.HasField("page_size") else DEFAULT_PAGE
        if not 1 <= size <= MAX_PAGE:
            rule = f"must be between 1 and {MAX_PAGE}"
            raise InvalidParamsError(message=f"pageSize: {rule}", data=field_error("pageSize", rule))
        check_state_filter(params.status)  # a number the enum does not know (proto3 keeps it)
        after = decode_cursor(params.page_token, "pageToken")
        since = (
            params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            if params.HasField("status_timestamp_after")
            else None
        )

        def wanted(item: WorkItem) -> bool:
            return (
                (not params.context_id or context_id_of(item) == params.context_id)
                and (not params.status or state_of(item) == params.status)
                and (since is None or item.updated_at >= since)
            )

        await project.work.mirror.sync()
        page = page_items((i for i in project.work.mirror.values() if wanted(i)), limit=size, after=after)
        tasks = []
        for item in page.items:
            task = apply_history_length(task_of(item), params)
            if not params.include_artifacts:
                task.ClearField("artifacts")
            tasks.append(task)
        return ListTasksResponse(
            tasks=tasks, next_page_token=page.next_cursor or "", page_size=size, total_size=page.total
        )

    @validate_request_params
    @refusals(conflict=TaskNotCancelableError)
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        project = (await served(context, params.tenant, Access.OPERATE)).project
        work_id = work_id_of(params.id)
        reason = params.metadata.fields["reason"].string_value if "reason" in params.metadata.fields else ""
        item = await project.queue.cancel(work_id, reason=reason[:2000], by=SUBMITTED_BY)
        return task_of(item)

    # -- messages ----------------------------------------------------------------------

    @validate_request_params
    @refusals()
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        where = await served(context, params.tenant, Access.OPERATE)
        validate_history_length(params.configuration)
        work_id, begin = await self._begin(where, params)
        if params.configuration.return_immediately:
            item = await begin()
        else:  # until the task ends or waits for input, as its stream would
            listener = where.project.relay.listen(_work_events, subject_id=work_id)
            try:
                translator = StreamTranslator()
                translator.start(await begin())
                async for _ in self._follow(where, listener, translator, wait_for_caller=True):
                    pass
                item = await where.project.queue.get(work_id)
            finally:
                where.project.relay.unlisten(listener)
            reply = reply_of(item)
            if reply is not None and not params.message.task_id:  # a new message answered directly
                return reply
        return apply_history_length(task_of(item), params.configuration)

    @validate_request_params
    @refusals()
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent, None]:
        where = await served(context, params.tenant, Access.OPERATE)
        validate_history_length(params.configuration)
        work_id, begin = await self._begin(where, params)
        listener = where.project.relay.listen(_work_events, subject_id=work_id)
        try:
            translator = StreamTranslator()
            yield apply_history_length(translator.start(await begin()), params.configuration)
            async for event in self._follow(where, listener, translator):
                yield event
        finally:
            where.project.relay.unlisten(listener)

    @validate_request_params
    @refusals()
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent, None]:
        where = await served(context, params.tenant, Access.READ)
        work_id = work_id_of(params.id)
        listener = where.project.relay.listen(_work_events, subject_id=work_id)
        try:
            item = await where.project.queue.get(work_id)
            if is_terminal(item):
                raise UnsupportedOperationError(
                    message="id: the task is in a final state (GetTask shows it)",
                    data=field_error("id", "the task is in a final state (GetTask shows it)"),
                )
            translator = StreamTranslator(until_terminal=True)  # open through input-required
            yield translator.start(item)
            async for event in self._follow(where, listener, translator):
                yield event
        finally:
            where.project.relay.unlisten(listener)

    async def _begin(
        self, where: Served, params: SendMessageRequest
    ) -> tuple[str, Callable[[], Awaitable[WorkItem]]]:
        """What a message starts: a new task (its webhook registered first), or, on a task
        (``message.taskId``), the answer to its question; the task's work id and the step
        that does it, run once the caller listens for the task's events."""
        if params.message.task_id:
            work_id = work_id_of(params.message.task_id, "message.taskId")
            return work_id, functools.partial(self._follow_up, where, params, work_id)
        work_id = new_id()
        await self._push_with_send(where, params, work_id)
        return work_id, functools.partial(self._submit, where, params, work_id)

    async def _push_with_send(self, where: Served, params: SendMessageRequest, work_id: str) -> None:
        """A webhook given with the message is registered before the work exists, so its
        first events reach it too (a refused URL refuses the message: nothing is submitted)."""
        if params.configuration.HasField("task_push_notification_config"):
            given = params.configuration.task_push_notification_config
            await self._register_push(where, work_id, given, url_field=SEND_PUSH_URL)

    async def _submit(self, where: Served, params: SendMessageRequest, work_id: str) -> WorkItem:
        context_id = params.message.context_id or new_id()
        submission = submission_of(params, context_id=context_id, default_capability=self.default_capability)
        item = await where.project.queue.submit(submission, submitted_by=SUBMITTED_BY, work_id=work_id)
        where.weft.spawn(where.weft.router.route(where.project, item), name=f"route:{item.id}")
        return item

    async def _follow_up(self, where: Served, params: SendMessageRequest, work_id: str) -> WorkItem:
        """A message on an existing task: the answer to the question its agent is waiting on
        (``input-required``); refused for a task that is not waiting for input. The item as
        the answer left it."""
        item = await where.project.queue.get(work_id)
        if params.message.context_id and params.message.context_id != context_id_of(item):
            rule = "must be the context of the task named by message.taskId"
            raise InvalidParamsError(
                message=f"message.contextId: {rule}", data=field_error("message.contextId", rule)
            )
        if item.status is WorkStatus.WAITING_ON_OPERATOR and item.question_id is not None:
            answer = text_of_parts(params.message)
            if not answer:
                rule = "must hold the answer as text"
                raise InvalidParamsError(
                    message=f"message.parts: {rule}", data=field_error("message.parts", rule)
                )
            await where.project.questions.answer(item.question_id, answer, by=A2A_ANSWERED_BY)
            return await where.project.queue.get(item.id)
        rule = (
            "the task is in a final state; send a new message without taskId"
            if is_terminal(item)
            else "this task is not waiting for input; follow it with SubscribeToTask or GetTask"
        )
        raise UnsupportedOperationError(
            message=f"message.taskId: {rule}", data=field_error("message.taskId", rule)
        )

    async def _follow(
        self,
        where: Served,
        listener: Listener,
        translator: StreamTranslator,
        *,
        wait_for_caller: bool = False,
    ) -> AsyncIterator[StreamEvent]:
        """The task's events from the relay until it ends (or waits for input). Events the
        listener had to drop are made up for by reading the record."""
        assert translator.last is not None
        work_id = translator.last.id
        seen_drops = 0
        while not translator.finished:
            if wait_for_caller:
                try:
                    relayed = await asyncio.wait_for(listener.queue.get(), DISCONNECT_CHECK_S)
                except TimeoutError:
                    if await where.disconnected():
                        return
                    continue
            else:
                relayed = await listener.queue.get()
            if listener.dropped > seen_drops:
                seen_drops = listener.dropped
                item: WorkItem | None = await where.project.queue.get(work_id)
                action = "resync"
            else:
                item, action = item_of_event(relayed.event), relayed.action
            if item is None:
                continue
            for event in translator.update(item, action):
                yield event

    # -- push notifications (weft/a2a/push.py) ------------------------------------------------

    @validate_request_params
    @refusals()
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        where = await served(context, params.tenant, Access.OPERATE)
        work_id = await self._push_task(where, params.task_id)
        return without_secrets(await self._register_push(where, work_id, params))

    @refusals()
    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        checked = GetTaskPushNotificationConfigRequest()
        checked.CopyFrom(params)
        if context.state.get("method") == GET_PUSH_0_3 and not checked.id:
            checked.id = "-"  # 0.3's pushNotificationConfigId is optional (1.0's id is required)
        validate_proto_required_fields(checked)
        where = await served(context, params.tenant, Access.READ)
        work_id = await self._push_task(where, params.task_id)
        configs = await self._webhooks(where, work_id)
        # Without a configuration id (0.3's pushNotificationConfigId is optional) the task's
        # own: the one stored under the task's id (a config given without an id), or its first.
        found = next((c for c in configs if c.id == (params.id or work_id)), None)
        if found is None and not params.id:
            found = next(iter(configs), None)
        if found is None:
            rule = "no push configuration with this id on this task"
            raise TaskNotFoundError(message=f"id: {rule}", data=field_error("id", rule))
        return without_secrets(found)

    @validate_request_params
    @refusals()
    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        where = await served(context, params.tenant, Access.READ)
        if params.page_token:  # every configuration of a task fits one page: none is issued
            rule = "not a page token this listing issued"
            raise InvalidParamsError(message=f"pageToken: {rule}", data=field_error("pageToken", rule))
        work_id = await self._push_task(where, params.task_id)
        configs = [without_secrets(c) for c in await self._webhooks(where, work_id)]
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    @validate_request_params
    @refusals()
    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        where = await served(context, params.tenant, Access.OPERATE)
        work_id = await self._push_task(where, params.task_id)
        push = await push_of(where.project).started()
        await push.configs.delete_info(work_id, context, params.id or None)

    async def _webhooks(self, where: Served, work_id: str) -> list[TaskPushNotificationConfig]:
        """A task's webhooks; a read starts nothing in a project that never had one."""
        push = push_of(where.project)
        if push.service is None and not await push.in_use():
            return []
        return (await push.started()).configs.configs(work_id)

    async def _push_task(self, where: Served, task_id: str) -> str:
        """The work id of a push method's ``taskId``: a task of this project."""
        work_id = work_id_of(task_id, "taskId")
        try:
            await where.project.queue.get(work_id)
        except WorkNotFound:
            rule = "no task with this id in this project"
            raise TaskNotFoundError(message=f"taskId: {rule}", data=field_error("taskId", rule)) from None
        return work_id

    async def _register_push(
        self, where: Served, work_id: str, config: TaskPushNotificationConfig, *, url_field: str = "url"
    ) -> TaskPushNotificationConfig:
        push = await push_of(where.project).started()
        await check_url(config.url, private_allowed=push.private_allowed, field=url_field)
        return await push.configs.set_info(work_id, config, ServerCallContext())

    # -- the extended card ------------------------------------------------------------------

    @refusals()
    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """The card with the capabilities on offer now, for a token holder (the public card
        names none when Weft asks for tokens)."""
        where = await served(context, params.tenant, Access.READ)
        weft = where.weft
        return await agent_card(
            where.project,
            base_url=where.base_url,
            auth=weft.settings.auth_enabled,
            grpc_port=weft.a2a_grpc_port,
        )
