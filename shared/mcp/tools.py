"""Strict MCP tools, built one way for Warp and Pattern.

A part declares each tool as a :class:`ToolSpec`: a function, its title and its
hints. :func:`build_tools` turns the specs into the SDK's ``Tool`` objects, for
``MCPServer(tools=...)``, with one set of rules:

* the input schema is the function's parameters after the first (which the
  builder binds: Warp's runtime, Pattern's access to its service), published
  with ``additionalProperties: false``;
* a call's arguments are checked against that schema before the function runs:
  an unknown name is refused (a name of the TypeScript Loom's is answered with
  ours, :func:`shared.legacy.argument_advice`), and a value that breaks a rule is
  refused naming the field and the rule, never the value;
* every refusal and failure is a coded tool error
  (:func:`shared.mcp.toolerrors.error_result`); what a part anticipates beyond a
  :class:`LoomError` (Warp: NATS failures) and what it does around each call
  (Warp: the in-flight count, a time limit, the drain notice) are its
  :class:`ToolHost` hooks.

Why this way, and only the SDK's public surface: the SDK validates a call's
arguments against a model made from the tool function's signature, drops
unknown names silently and quotes rejected values in its error text. So the
function the SDK gets takes only the request :class:`Context` (nothing for the
SDK to validate or drop), the schema is published through ``Tool.parameters``,
and the function reads the call's arguments from the request context and
validates them itself, with the SDK's own ``FuncMetadata`` for the published
signature, so what is enforced is exactly what is published. Done there rather
than in a server middleware, a refusal takes the SDK's ordinary result path
(after its handshake gate, serialized and stamped like any tool result). A tool
so built answers MCP requests (any transport, the in-memory client too); Python
code calls the tool's own function instead.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ValidationError

from shared.errors import LoomError, describe_problems, shown_name, validation_problems
from shared.legacy import argument_advice
from shared.mcp.toolerrors import INTERNAL, VALIDATION_ERROR, error_result

PROBLEMS_SHOWN = 10
"""Problems named in one refusal; the rest are counted."""


@dataclass(frozen=True, eq=False)
class ToolSpec:
    """One tool as its part declares it (each spec is equal only to itself: its schema and
    validator are built once per process, :func:`prepare`).

    ``fn`` is called as ``fn(bound, **arguments)``, or ``fn(bound, request)`` when
    ``model`` is given (``request`` is the arguments validated as that model, so rules
    across fields hold too). ``bound`` is what :func:`build_tools` was given."""

    fn: Callable[..., Awaitable[CallToolResult]]
    name: str
    title: str
    description: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    signature: inspect.Signature | None = None
    """The arguments (their annotations are the schema) and the result; by default
    ``fn``'s signature without its first parameter."""
    model: type[BaseModel] | None = None


def tool(
    fn: Callable[..., Awaitable[CallToolResult]],
    *,
    title: str,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
) -> ToolSpec:
    """A module-level function as a tool: named after the function, described by its docstring."""
    return ToolSpec(
        fn,
        name=fn.__name__,
        title=title,
        description=inspect.cleandoc(fn.__doc__ or ""),
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
    )


class ToolHost:
    """What a part adds to each call of its tools (the builder's hooks); the defaults add nothing."""

    def __init__(
        self, *, server: str, validation_code: str = VALIDATION_ERROR, log: logging.Logger | None = None
    ) -> None:
        self.server = server
        """Named in the message of an unexpected failure ("see Warp's log")."""
        self.validation_code = validation_code
        """The code of a refusal of the arguments (Pattern keeps its original's)."""
        self.log = log or logging.getLogger("loom.mcp.tools")

    @property
    def time_limit_s(self) -> float | None:
        """A call still running after this long is stopped (a ``TimeoutError`` for :meth:`anticipated`)."""
        return None

    def started(self, tool: str) -> None:
        """A call with valid arguments is about to run."""

    def ended(self, tool: str) -> None:
        """That call is over, however it ended."""

    def anticipated(self, exc: Exception) -> LoomError | None:
        """``exc`` (not a LoomError) as the refusal the caller gets, or None for a bug."""
        return None

    def finished(self, result: CallToolResult) -> CallToolResult:
        """A successful result, as the caller gets it."""
        return result


def describe_validation(exc: ValidationError) -> str:
    """Every problem, each starting with the field it is about (never the rejected value)."""
    problems = validation_problems(exc.errors(include_url=False))
    return "invalid arguments: " + describe_problems(problems, limit=PROBLEMS_SHOWN)


class _Arguments:
    """One tool's argument check: its published schema, strictly."""

    def __init__(self, name: str, signature: inspect.Signature, model: type[BaseModel] | None) -> None:
        published = _published(name, signature)
        self.tool = name
        self.metadata = published.fn_metadata
        self.schema: dict[str, Any] = {**published.parameters, "additionalProperties": False}
        self.model = model
        fields = self.metadata.arg_model.model_fields
        self.names = [info.alias or field for field, info in fields.items()]
        self.known = frozenset(self.names) | frozenset(fields)

    def check(self, given: object) -> dict[str, Any] | BaseModel | str:
        """The arguments to call with, or why they are refused."""
        if not isinstance(given, Mapping):
            return "invalid arguments: arguments: must be an object"
        unknown = sorted(key for key in given if key not in self.known)
        if unknown:
            return self._unknown(unknown)
        try:  # the SDK's leniency first (JSON text for a list or an object), then the rules
            if self.model is None:
                return self.metadata.validate_arguments(dict(given))
            return self.model.model_validate(self.metadata.pre_parse_json(dict(given)))
        except ValidationError as exc:
            return describe_validation(exc)

    def _unknown(self, unknown: list[str]) -> str:
        problems = [advice for key in unknown if (advice := argument_advice(self.tool, key))]
        others = [shown_name(key) for key in unknown if argument_advice(self.tool, key) is None]
        if others:
            takes = ", ".join(self.names) or "none"
            problems.append(f"{', '.join(others)}: unknown field (this tool takes: {takes})")
        return "invalid arguments: " + "; ".join(problems)


def _published(name: str, signature: inspect.Signature) -> Tool:
    """The SDK's view of ``signature`` as a tool's arguments: its schema and its validator."""

    async def arguments(**_: Any) -> None:
        """Never called: only its signature is read."""

    arguments.__name__ = name  # the schema's title is "<name>Arguments"
    arguments.__signature__ = signature.replace(return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
    return Tool.from_function(arguments, name=name, structured_output=False)


def _arguments_of(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature without its first parameter (the bound one), annotations evaluated."""
    full = inspect.signature(fn, eval_str=True)
    return full.replace(parameters=list(full.parameters.values())[1:])


def build_tools(specs: Iterable[ToolSpec], bound: object, host: ToolHost) -> list[Tool]:
    """The SDK tools for ``specs``, each calling its function with ``bound``, in order."""
    return [_build(spec, bound, host) for spec in specs]


def prepare(specs: Iterable[ToolSpec]) -> None:
    """Build what ``specs``' tools share whoever they are bound to (their schemas and
    validators: most of a tool's cost to build) now, e.g. in a zygote before it forks."""
    for spec in specs:
        _template(spec)


@dataclass(frozen=True)
class _Template:
    """What every build of one spec shares: its argument check and the SDK's tool, whose
    function is replaced by each build's (a shallow copy: the rest is read-only)."""

    arguments: _Arguments
    tool: Tool


@functools.cache
def _template(spec: ToolSpec) -> _Template:
    signature = spec.signature or _arguments_of(spec.fn)
    returns = signature.return_annotation

    async def call(ctx: Context) -> CallToolResult:  # the signature the SDK reads; each build's replaces it
        raise NotImplementedError(spec.name)

    call.__name__ = spec.name
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)],
        return_annotation=returns,
    )
    call.__annotations__ = {"ctx": Context, "return": returns}
    arguments = _Arguments(spec.name, signature, spec.model)
    built = Tool.from_function(
        call,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )
    built.parameters = arguments.schema
    return _Template(arguments, built)


def _build(spec: ToolSpec, bound: object, host: ToolHost) -> Tool:
    arguments = _template(spec).arguments

    async def call(ctx: Context) -> CallToolResult:
        params = ctx.request_context.params or {}
        checked = arguments.check(params.get("arguments") or {})
        if isinstance(checked, str):
            host.log.info("%s refused its arguments", spec.name)
            return error_result(LoomError(checked, code=host.validation_code))
        return await _run(spec, bound, host, checked)

    call.__name__ = spec.name
    return _template(spec).tool.model_copy(update={"fn": call})


async def _run(
    spec: ToolSpec, bound: object, host: ToolHost, checked: dict[str, Any] | BaseModel
) -> CallToolResult:
    host.started(spec.name)
    try:
        limit = host.time_limit_s
        async with asyncio.timeout(limit):
            if isinstance(checked, BaseModel):
                outcome = await spec.fn(bound, checked)
            else:
                outcome = await spec.fn(bound, **checked)
    except Exception as exc:
        return error_result(_refusal(spec.name, host, exc))
    finally:
        host.ended(spec.name)
    return host.finished(outcome)


def _refusal(name: str, host: ToolHost, exc: Exception) -> LoomError:
    """What the caller is told about ``exc``: the refusal it is, or an internal error (logged)."""
    found = exc if isinstance(exc, LoomError) else host.anticipated(exc)
    if found is not None:
        return found
    host.log.exception("%s failed unexpectedly", name)
    return LoomError(
        f"{name} failed unexpectedly ({type(exc).__name__}); see {host.server}'s log", code=INTERNAL
    )
