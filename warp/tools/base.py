"""How a Warp tool becomes an MCP tool: strict arguments, clear errors, text + structure.

* the argument model refuses unknown arguments and keeps rejected values out
  of error messages, so the published schema is exactly what is enforced;
* anticipated failures (bad input, NATS away, a refused work transition)
  become tool errors that name the field and the rule; a bug is logged with
  its traceback and reported without internals;
* every call counts as in flight, so a shutdown drain can wait for it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from shared.errors import safe_loc, without_value
from warp.errors import describe

if TYPE_CHECKING:
    from warp.runtime import WarpRuntime

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


class _StrictMetadata(FuncMetadata):
    """Argument validation that refuses unknown arguments and never echoes rejected values."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        model = self.arg_model
        known = _argument_names(model)
        unknown = [key for key in arguments_to_validate if key not in known]
        if unknown:
            raise ValidationError.from_exception_data(
                model.__name__,
                [
                    {"type": "extra_forbidden", "loc": safe_loc((key,)), "input": arguments_to_validate[key]}
                    for key in unknown
                ],
                hide_input=True,
            )
        try:
            return super().validate_arguments(arguments_to_validate)
        except ValidationError as exc:
            details = [_detail(err) for err in exc.errors(include_url=False)]
            raise ValidationError.from_exception_data(exc.title, details, hide_input=True) from None


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
    tool.fn_metadata.__class__ = _StrictMetadata
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
        rt.call_started()
        try:
            async with asyncio.timeout(rt.settings.op_timeout_s * 3):
                outcome = await fn(**kwargs)
        except ToolError:
            raise
        except Exception as exc:
            text = describe(exc, nats_url=rt.display_url)
            if text is None:
                log.exception("%s failed unexpectedly", name)
                raise ToolError(f"{name} failed unexpectedly ({type(exc).__name__}); see Warp's log") from exc
            raise ToolError(text) from None
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
