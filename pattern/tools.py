"""The Pattern MCP tools: a thin adapter from MCP calls to :class:`MemoryService`.

:func:`register_pattern_tools` adds every tool to any ``MCPServer`` — the
standalone ``pattern`` server and Warp (``warp --with-memory``), which shares
its NATS connection and identity by passing its own ``get_service``.

Each tool's parameters are generated from its input model (``pattern.inputs``),
so the schema in ``tools/list`` carries the model's constraints; the
:class:`StrictArguments` middleware checks a call's arguments against the model
before the SDK does (naming the field and the rule, never the value), and the
handler validates again. Results are the result models as structured output
plus their readable text. A refusal is a tool error whose ``_meta`` names its
code (``shared.mcp.toolerrors``; Pattern's codes are the TypeScript
Pattern's, see ``pattern.errors``), and an argument of the TypeScript Pattern's
(``memoryId``) is named with the one to use instead.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticUndefined

from pattern import inputs as i
from pattern import results as r
from pattern.errors import InvalidInputError, UnavailableError
from pattern.service import MemoryService
from shared.errors import LoomError, describe_problems, shown_name, validation_problems
from shared.legacy import argument_advice
from shared.mcp.toolerrors import error_result

log = logging.getLogger("loom.pattern.tools")

GetService = Callable[[], MemoryService]
"""Returns the ready service or raises :class:`UnavailableError` with a reason."""
HealthFallback = Callable[[], r.HealthResult]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_model: type[i.InputModel]
    output_model: type[BaseModel]
    run: Callable[[MemoryService, Any], Awaitable[Any]]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "pattern_remember",
        "Remember",
        "Store a memory. category recent (default) and tasks expire after 24 h; longterm, core, decisions, "
        "architecture and learnings do not. scope private (default), personal (you, any project), team "
        "(this project) or public. Content is scanned for secrets (a warning, not a refusal).",
        i.RememberInput,
        r.RememberResult,
        lambda s, q: s.remember(q),
    ),
    ToolSpec(
        "pattern_remember_task",
        "Remember a task",
        "Store a task note (category tasks); it expires after 24 h unless committed with "
        "pattern_commit_insight.",
        i.RememberTaskInput,
        r.RememberResult,
        lambda s, q: s.remember_task(q),
    ),
    ToolSpec(
        "pattern_remember_learning",
        "Remember a learning",
        "Store something learned (category learnings, never expires). Private by default; share it with "
        "the team later with pattern_share_learning.",
        i.RememberLearningInput,
        r.RememberResult,
        lambda s, q: s.remember_learning(q),
    ),
    ToolSpec(
        "pattern_commit_insight",
        "Commit an insight",
        "Promote one of your memories to longterm and remove its expiry, optionally rewriting its content, "
        "adding tags or changing its priority. The id stays the same.",
        i.CommitInsightInput,
        r.CommitInsightResult,
        lambda s, q: s.commit_insight(q),
        idempotent=True,
    ),
    ToolSpec(
        "pattern_core_memory",
        "Remember a core memory",
        "Store a core memory: who you are and rules you always follow. Recalled first, never expires, "
        "protected (forgetting needs force=true), at most 100 per agent, private or personal only; "
        "your sub-agents do not see it.",
        i.CoreMemoryInput,
        r.RememberResult,
        lambda s, q: s.core_memory(q),
    ),
    ToolSpec(
        "pattern_forget",
        "Forget a memory",
        "Delete one memory you created (a personal one of your user also works). Core memories need "
        "force=true.",
        i.ForgetInput,
        r.ForgetResult,
        lambda s, q: s.forget(q),
        destructive=True,
    ),
    ToolSpec(
        "pattern_recall_context",
        "Recall context",
        "Recall the memories you can see, ordered core > longterm > shared (decisions, architecture, "
        "learnings) > recent > tasks, newest first within each, with a summary of at most 4 KB and counts "
        "(visible, by category and scope, recently expired). Filters combine with AND; tags must all match.",
        i.RecallInput,
        r.RecallResult,
        lambda s, q: s.recall_context(q),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "pattern_share_learning",
        "Share a learning",
        "Copy (default) or move one of your memories to team (default) or public scope. The shared "
        "memory does not expire; core memories cannot be shared.",
        i.ShareLearningInput,
        r.ShareResult,
        lambda s, q: s.share_learning(q),
    ),
    ToolSpec(
        "pattern_cleanup",
        "Clean up temporary memories",
        "Remove your own expired recent/tasks memories (nats-server normally expires them; this is the "
        "backstop), or with older_than_hours also younger ones. Never touches other agents' memories.",
        i.CleanupInput,
        r.CleanupResult,
        lambda s, q: s.cleanup(q),
        destructive=True,
        idempotent=True,
    ),
    ToolSpec(
        "pattern_export_memories",
        "Export memories",
        "Write your own memories to a versioned JSON file in the export directory (PATTERN_EXPORT_DIR, "
        "default <project>/.loom/memory-exports).",
        i.ExportInput,
        r.ExportResult,
        lambda s, q: s.export_memories(q),
    ),
    ToolSpec(
        "pattern_import_memories",
        "Import memories",
        "Import a JSON export from the export directory. Every record becomes yours (this agent, project "
        "and user) whatever the file says; each record is validated and skipped ones are reported. "
        "Importing the same file twice adds nothing.",
        i.ImportInput,
        r.ImportResult,
        lambda s, q: s.import_memories(q),
        idempotent=True,
    ),
    ToolSpec(
        "pattern_remember_bulk",
        "Remember many",
        "Store 1 to 100 memories in one call; each item succeeds or fails on its own.",
        i.RememberBulkInput,
        r.BulkRememberResult,
        lambda s, q: s.remember_bulk(q),
    ),
    ToolSpec(
        "pattern_forget_bulk",
        "Forget many",
        "Forget 1 to 500 memories by id; each id succeeds or fails on its own. Core memories need "
        "force=true.",
        i.ForgetBulkInput,
        r.BulkForgetResult,
        lambda s, q: s.forget_bulk(q),
        destructive=True,
    ),
    ToolSpec(
        "pattern_build_context",
        "Build context",
        "The context to load for a task, within a token budget: your core memories, the work item's "
        "context tree (earlier attempts, notes, failures), your other memories, your parent chain's "
        "(sub-agents) and the team's decisions and learnings, each layer allotted a share of the budget, "
        "duplicates removed, with what was left out and why. Counted with a real tokenizer (named).",
        i.BuildContextInput,
        r.BuildContextResult,
        lambda s, q: s.build_context(q),
        read_only=True,
    ),
    ToolSpec(
        "pattern_health",
        "Memory health",
        "Connection state, identity, buckets, index size, TTL mode and limits. Answers even while NATS is "
        "unreachable.",
        i.HealthInput,
        r.HealthResult,
        lambda s, q: _health(s),
        read_only=True,
        idempotent=True,
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)


async def _health(service: MemoryService) -> r.HealthResult:
    return service.health()


def describe_validation(exc: ValidationError) -> str:
    """Every problem, each starting with the field it is about (never the rejected value)."""
    return "invalid arguments: " + describe_problems(validation_problems(exc.errors()), limit=20)


def _signature(model: type[BaseModel], output: type[BaseModel]) -> inspect.Signature:
    """Keyword parameters mirroring ``model``'s fields and their constraints."""
    params = []
    for name, info in model.model_fields.items():
        annotation: Any = Annotated[(info.annotation, *info.metadata, Field(description=info.description))]
        default = inspect.Parameter.empty if info.default is PydanticUndefined else info.default
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    return inspect.Signature(params, return_annotation=Annotated[CallToolResult, output])


def _to_result(result: Any) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.text())],
        structured_content=result.model_dump(mode="json"),
    )


class StrictArguments:
    """Server middleware: a Pattern tool's arguments are checked against its input
    model before the SDK sees them, so a refusal names the field and the rule and
    never repeats the value (the SDK's own message quotes every argument). Unknown
    argument names are an error too, and ``tools/list`` says so
    (``additionalProperties: false``): the SDK would drop them silently, and a
    mistyped filter name must not turn into an unfiltered answer."""

    def __init__(self, tools: Mapping[str, tuple[type[BaseModel], FuncMetadata]]) -> None:
        self._tools = dict(tools)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        if ctx.method == "tools/call" and params.get("name") in self._tools:
            refusal = self.refusal(params["name"], params.get("arguments") or {})
            if refusal is not None:
                return error_result(InvalidInputError(refusal))
        result = await call_next(ctx)
        if ctx.method == "tools/list" and isinstance(result, dict):
            for tool in result.get("tools", ()):
                schema = tool.get("inputSchema") if isinstance(tool, dict) else None
                if isinstance(schema, dict) and tool.get("name") in self._tools:
                    schema["additionalProperties"] = False
        return result

    def refusal(self, name: str, arguments: object) -> str | None:
        """Why ``arguments`` cannot be passed to tool ``name``, or None."""
        model, metadata = self._tools[name]
        if not isinstance(arguments, Mapping):
            return None  # not an object: the SDK refuses the request itself
        unknown = sorted(set(arguments) - set(model.model_fields))
        if unknown:
            # a name of the TypeScript Pattern's is answered with the one to use instead
            problems = [advice for key in unknown if (advice := argument_advice(name, key))]
            others = [key for key in unknown if argument_advice(name, key) is None]
            if others:
                names = ", ".join(shown_name(key) for key in others)
                fields = ", ".join(model.model_fields) or "none"
                problems.append(f"{names}: unknown field (this tool takes: {fields})")
            return "invalid arguments: " + "; ".join(problems)
        try:  # the SDK's leniency first (JSON text for a list or object), then the model
            model.model_validate(metadata.pre_parse_json(dict(arguments)))
        except ValidationError as exc:
            return describe_validation(exc)
        return None


def _handler(spec: ToolSpec, get_service: GetService, health: HealthFallback | None) -> Callable[..., Any]:
    async def handler(**kwargs: Any) -> CallToolResult:
        try:
            req = spec.input_model.model_validate(kwargs)
        except ValidationError as exc:
            return error_result(InvalidInputError(describe_validation(exc)))
        try:
            service = get_service()
        except UnavailableError as exc:
            if spec.name == "pattern_health":
                fallback = health() if health is not None else _unavailable(exc.message)
                return _to_result(fallback)
            return error_result(exc)
        try:
            result = await spec.run(service, req)
        except LoomError as exc:
            return error_result(exc)
        return _to_result(result)

    handler.__name__ = spec.name
    handler.__doc__ = spec.description
    handler.__signature__ = _signature(spec.input_model, spec.output_model)  # type: ignore[attr-defined]
    return handler


def _unavailable(reason: str) -> r.HealthResult:
    return r.HealthResult(status="unavailable", nats_url="", connected=False, error=reason)


def register_pattern_tools(
    server: MCPServer[Any],
    get_service: GetService,
    *,
    health: HealthFallback | None = None,
) -> list[str]:
    """Add the 15 ``pattern_*`` tools to ``server``; returns their names.

    ``get_service`` is called on every tool call and must return a started
    :class:`MemoryService` or raise :class:`UnavailableError` saying why
    (tools then answer with that error). ``health`` describes the state for
    ``pattern_health`` while there is no service yet.
    """
    handlers = {spec.name: _handler(spec, get_service, health) for spec in TOOLS}
    server.middleware.append(
        StrictArguments({spec.name: (spec.input_model, func_metadata(handlers[spec.name])) for spec in TOOLS})
    )
    for spec in TOOLS:
        server.add_tool(
            handlers[spec.name],
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
            structured_output=True,
        )
    return list(TOOL_NAMES)
