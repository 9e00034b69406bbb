"""How a Warp tool becomes an MCP tool: strict arguments, clear errors, text + structure.

* the argument model refuses unknown arguments and keeps rejected values out
  of error messages, so the published schema is exactly what is enforced;
* anticipated failures (bad input, NATS away, a refused work transition)
  become tool errors that name the field and the rule and carry a code in their
  ``_meta`` (``shared.mcp.toolerrors``); a bug is logged with its
  traceback and reported without internals (code ``internal``);
* every call counts as in flight, so a shutdown drain can wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from shared.errors import LoomError, safe_loc, validation_problems, without_value
from shared.legacy import argument_advice
from shared.mcp.toolerrors import INTERNAL, VALIDATION_ERROR, error_result
from warp.errors import as_loom_error

if TYPE_CHECKING:
    from shared.channels import ReadMessage
    from warp.messages import InboxMessage
    from warp.runtime import WarpRuntime
    from warp.services import Services

log = logging.getLogger("loom.warp.tools")

ToolFn = Callable[..., Awaitable[CallToolResult]]


def result(payload: BaseModel, text: str) -> CallToolResult:
    """Structured content plus the human-readable rendering."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload.model_dump(mode="json"),
    )


_KNOWN_TYPES = frozenset(typing.get_args(ErrorType))


@functools.cache
def _argument_names(model: type[BaseModel]) -> frozenset[str]:
    return frozenset({f.alias or name for name, f in model.model_fields.items()} | set(model.model_fields))


REFUSED = "_loom_refused"
"""Keyword under which :class:`_StrictMetadata` hands a refusal to the tool's wrapper: the
SDK would turn a raised ValidationError into bare text, and a refusal carries a code."""


class _StrictMetadata(FuncMetadata):
    """Argument validation that refuses unknown arguments and never echoes rejected values.

    A refusal is not raised but passed to the wrapper (:data:`REFUSED`), which answers
    with a coded tool error; an argument the TypeScript Warp had (``agentType``) is
    named with the one to use instead."""

    tool_name: str = ""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        model = self.arg_model
        known = _argument_names(model)
        unknown = [key for key in arguments_to_validate if key not in known]
        renamed = [advice for key in unknown if (advice := argument_advice(self.tool_name, key))]
        if unknown:
            problems = validation_problems(
                [
                    {"type": "extra_forbidden", "loc": safe_loc((key,)), "input": None}
                    for key in unknown
                    if argument_advice(self.tool_name, key) is None
                ]
            )
            return {REFUSED: _refusal([*renamed, *(f"{p.field}: {p.message}" for p in problems)])}
        try:
            return super().validate_arguments(arguments_to_validate)
        except ValidationError as exc:
            details = [_detail(err) for err in exc.errors(include_url=False)]
            hidden = ValidationError.from_exception_data(exc.title, details, hide_input=True)
            problems = validation_problems(hidden.errors(include_url=False))
            return {REFUSED: _refusal([f"{p.field}: {p.message}" for p in problems])}


def _refusal(problems: list[str]) -> LoomError:
    text = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
    return LoomError(f"invalid arguments: {text}", code=VALIDATION_ERROR)


def _detail(err: ErrorDetails) -> InitErrorDetails:
    """The same error with a loc fit to show, and a message without the rejected value."""
    detail: InitErrorDetails = {"type": err["type"], "loc": safe_loc(err["loc"]), "input": err.get("input")}
    if "ctx" in err:
        detail["ctx"] = err["ctx"]
    if err["type"] not in _KNOWN_TYPES:
        message = without_value(err["msg"].removeprefix("Value error, "), err.get("input"))
        detail["type"] = PydanticCustomError("invalid", message)
        detail.pop("ctx", None)
    return detail


def _strict(tool: Tool) -> Tool:
    """Same validation model, but unknown arguments are refused (and the schema says so)."""
    meta = tool.fn_metadata
    tool.fn_metadata = _StrictMetadata(
        arg_model=meta.arg_model,
        output_schema=meta.output_schema,
        output_model=meta.output_model,
        wrap_output=meta.wrap_output,
        tool_name=tool.name,
    )
    tool.parameters = {**tool.parameters, "additionalProperties": False}
    return tool


def make_tool(
    rt: WarpRuntime,
    fn: ToolFn,
    *,
    title: str,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
) -> Tool:
    name = fn.__name__

    @functools.wraps(fn)
    async def guarded(**kwargs: Any) -> CallToolResult:
        refused = kwargs.pop(REFUSED, None)
        if isinstance(refused, LoomError):
            log.info("%s refused its arguments", name)
            return error_result(refused)
        rt.call_started()
        try:
            async with asyncio.timeout(rt.settings.op_timeout_s * 3):
                outcome = await fn(**kwargs)
        except Exception as exc:
            refusal = as_loom_error(exc, nats_url=rt.display_url)
            if refusal is None:
                log.exception("%s failed unexpectedly", name)
                refusal = LoomError(
                    f"{name} failed unexpectedly ({type(exc).__name__}); see Warp's log", code=INTERNAL
                )
            return error_result(refusal)
        finally:
            rt.call_finished()
        notice = rt.drain_notice()
        if notice:
            outcome.content.insert(0, TextContent(type="text", text=notice))
        return outcome

    tool = Tool.from_function(
        guarded,
        name=name,
        title=title,
        description=inspect.cleandoc(fn.__doc__ or ""),
        annotations=ToolAnnotations(
            title=title,
            read_only_hint=read_only,
            destructive_hint=destructive,
            idempotent_hint=idempotent,
            open_world_hint=False,
        ),
    )
    return _strict(tool)


def about_held_work(svc: Services, name: str, destination: str) -> contextlib.AbstractContextManager[Any]:
    """A message sent while the agent holds one item is about it: a span of that item's
    trace, current while the message goes out, so the message carries that trace on
    (docs/operations.md, Traces). Otherwise nothing is recorded."""
    about = svc.presence.about()
    if about is None:
        return contextlib.nullcontext()
    work_id, traceparent = about
    return svc.traces.span(
        name,
        work_id=work_id,
        traceparent=traceparent,
        kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "nats", "messaging.destination.name": destination},
        carry_work_id=True,
    )


def record_received(svc: Services, messages: Iterable[InboxMessage | ReadMessage], source: str) -> None:
    """The reading side of messages sent about a work item: a span in that item's timeline,
    a child of the sender's (docs/operations.md, Traces)."""
    for received in messages:
        if received.about is not None:
            work_id, traceparent = received.about
            with svc.traces.span(
                "message.receive",
                work_id=work_id,
                traceparent=traceparent,
                kind=SpanKind.CONSUMER,
                attributes={"messaging.system": "nats", "messaging.destination.name": source},
            ):
                pass
