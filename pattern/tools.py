"""The Pattern MCP tools: a thin adapter from MCP calls to :class:`MemoryService`.

:func:`pattern_tools` builds every tool for an ``MCPServer`` — the standalone
``pattern`` server and Warp (``warp --with-memory``), which shares its NATS
connection and identity by passing its own ``get_service``.

The tools are built by :func:`shared.mcp.tools.build_tools`, the builder Warp's
tools use too: each tool's parameters are generated from its input model
(``pattern.inputs``), so the schema in ``tools/list`` carries the model's
constraints (and ``additionalProperties: false``); a call's arguments are
validated as that model before the service is called, naming the field and the
rule, never the value, and an argument of the TypeScript Pattern's
(``memoryId``) is named with the one to use instead. Results are the result
models as structured output plus their readable text. A refusal is a tool
error whose ``_meta`` names its code (``shared.mcp.toolerrors``; Pattern's
codes are the TypeScript Pattern's, see ``pattern.errors``).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field
from pydantic_core import PydanticUndefined

from pattern import inputs as i
from pattern import results as r
from pattern.errors import InvalidInputError, UnavailableError
from pattern.service import MemoryService
from shared.mcp.tools import ToolHost, ToolSpec, build_tools

log = logging.getLogger("loom.pattern.tools")

GetService = Callable[[], MemoryService]
"""Returns the ready service or raises :class:`UnavailableError` with a reason."""
HealthFallback = Callable[[], r.HealthResult]
UntilReady = Callable[[], Awaitable[None]]
Run = Callable[[MemoryService, Any], Awaitable[BaseModel]]
"""A service operation: the service and the validated input model to the result model."""
Answer = Callable[[Any, Any], Awaitable[CallToolResult]]
"""A tool that needs more than the service (``pattern_health``): called with :class:`Memory`."""


@dataclass(frozen=True)
class Memory:
    """What the tools reach the service through (the builder binds it to every tool)."""

    get_service: GetService
    health: HealthFallback | None = None
    """Describes the state for ``pattern_health`` while there is no service yet."""
    until_ready: UntilReady | None = None
    """Waits (bounded) for a service still loading, before a call fails with the reason."""

    async def service(self) -> MemoryService:
        """The ready service; one still loading is waited for (:attr:`until_ready`) once."""
        try:
            return self.get_service()
        except UnavailableError:
            if self.until_ready is None:
                raise
        await self.until_ready()
        return self.get_service()  # ready now, or the current reason


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


async def _serve(run: Run, memory: Memory, request: BaseModel) -> CallToolResult:
    return _to_result(await run(await memory.service(), request))


async def _health(memory: Memory, request: i.HealthInput) -> CallToolResult:
    """Answers without a service too: the host's description of the state, or the reason."""
    try:
        service = memory.get_service()
    except UnavailableError as exc:
        fallback = memory.health() if memory.health is not None else _unavailable(exc.message)
        return _to_result(fallback)
    return _to_result(service.health())


def _unavailable(reason: str) -> r.HealthResult:
    return r.HealthResult(status="unavailable", nats_url="", connected=False, error=reason)


def _tool(
    name: str,
    title: str,
    description: str,
    input_model: type[i.InputModel],
    output_model: type[BaseModel],
    run: Run | None = None,
    *,
    answer: Answer | None = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
) -> ToolSpec:
    """One memory tool: ``run`` called with the service and the input validated as
    ``input_model`` (or ``answer``, called with :class:`Memory` and that input)."""
    if answer is None:
        assert run is not None, name
        answer = functools.partial(_serve, run)
    return ToolSpec(
        answer,
        name=name,
        title=title,
        description=description,
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
        signature=_signature(input_model, output_model),
        model=input_model,
    )


TOOLS: tuple[ToolSpec, ...] = (
    _tool(
        "pattern_remember",
        "Remember",
        "Store a memory. category recent (default) and tasks expire after 24 h; longterm, core, decisions, "
        "architecture and learnings do not. scope private (default), personal (you, any project), team "
        "(this project) or public. Content is scanned for secrets (a warning, not a refusal).",
        i.RememberInput,
        r.RememberResult,
        MemoryService.remember,
    ),
    _tool(
        "pattern_remember_task",
        "Remember a task",
        "Store a task note (category tasks); it expires after 24 h unless committed with "
        "pattern_commit_insight.",
        i.RememberTaskInput,
        r.RememberResult,
        MemoryService.remember_task,
    ),
    _tool(
        "pattern_remember_learning",
        "Remember a learning",
        "Store something learned (category learnings, never expires). Private by default; share it with "
        "the team later with pattern_share_learning.",
        i.RememberLearningInput,
        r.RememberResult,
        MemoryService.remember_learning,
    ),
    _tool(
        "pattern_commit_insight",
        "Commit an insight",
        "Promote one of your memories to longterm and remove its expiry, optionally rewriting its content, "
        "adding tags or changing its priority. The id stays the same.",
        i.CommitInsightInput,
        r.CommitInsightResult,
        MemoryService.commit_insight,
        idempotent=True,
    ),
    _tool(
        "pattern_core_memory",
        "Remember a core memory",
        "Store a core memory: who you are and rules you always follow. Recalled first, never expires, "
        "protected (forgetting needs force=true), at most 100 per agent, private or personal only; "
        "your sub-agents do not see it.",
        i.CoreMemoryInput,
        r.RememberResult,
        MemoryService.core_memory,
    ),
    _tool(
        "pattern_forget",
        "Forget a memory",
        "Delete one memory you created (a personal one of your user also works). Core memories need "
        "force=true.",
        i.ForgetInput,
        r.ForgetResult,
        MemoryService.forget,
        destructive=True,
    ),
    _tool(
        "pattern_recall_context",
        "Recall context",
        "Recall the memories you can see, ordered core > longterm > shared (decisions, architecture, "
        "learnings) > recent > tasks, newest first within each, with a summary of at most 4 KB and counts "
        "(visible, by category and scope, recently expired). Filters combine with AND; tags must all match.",
        i.RecallInput,
        r.RecallResult,
        MemoryService.recall_context,
        read_only=True,
        idempotent=True,
    ),
    _tool(
        "pattern_share_learning",
        "Share a learning",
        "Copy (default) or move one of your memories to team (default) or public scope. The shared "
        "memory does not expire; core memories cannot be shared.",
        i.ShareLearningInput,
        r.ShareResult,
        MemoryService.share_learning,
    ),
    _tool(
        "pattern_cleanup",
        "Clean up temporary memories",
        "Remove your own expired recent/tasks memories (nats-server normally expires them; this is the "
        "backstop), or with older_than_hours also younger ones. Never touches other agents' memories.",
        i.CleanupInput,
        r.CleanupResult,
        MemoryService.cleanup,
        destructive=True,
        idempotent=True,
    ),
    _tool(
        "pattern_export_memories",
        "Export memories",
        "Write your own memories to a versioned JSON file in the export directory (PATTERN_EXPORT_DIR, "
        "default <project>/.loom/memory-exports).",
        i.ExportInput,
        r.ExportResult,
        MemoryService.export_memories,
    ),
    _tool(
        "pattern_import_memories",
        "Import memories",
        "Import a JSON export from the export directory. Every record becomes yours (this agent, project "
        "and user) whatever the file says; each record is validated and skipped ones are reported. "
        "Importing the same file twice adds nothing.",
        i.ImportInput,
        r.ImportResult,
        MemoryService.import_memories,
        idempotent=True,
    ),
    _tool(
        "pattern_remember_bulk",
        "Remember many",
        "Store 1 to 100 memories in one call; each item succeeds or fails on its own.",
        i.RememberBulkInput,
        r.BulkRememberResult,
        MemoryService.remember_bulk,
    ),
    _tool(
        "pattern_forget_bulk",
        "Forget many",
        "Forget 1 to 500 memories by id; each id succeeds or fails on its own. Core memories need "
        "force=true.",
        i.ForgetBulkInput,
        r.BulkForgetResult,
        MemoryService.forget_bulk,
        destructive=True,
    ),
    _tool(
        "pattern_build_context",
        "Build context",
        "The context to load for a task, within a token budget: your core memories, the work item's "
        "context tree (earlier attempts, notes, failures), your other memories, your parent chain's "
        "(sub-agents) and the team's decisions and learnings, each layer allotted a share of the budget, "
        "duplicates removed, with what was left out and why. Counted with a real tokenizer (named). In "
        "each memory layer the hot tier comes first, then warm, then cold (tiers narrows it); shape chat "
        "also returns a system prompt and messages.",
        i.BuildContextInput,
        r.BuildContextResult,
        MemoryService.build_context,
        read_only=True,
    ),
    _tool(
        "pattern_read",
        "Read a memory",
        "One memory by id, whole, with its version, who wrote it, its access count and tier (hot, warm, "
        "cold). The scope order decides which copy: yours, your parent chain's, the team's, your user's, "
        "the public one. Counts as a read (a memory read often rises to the hot tier).",
        i.ReadInput,
        r.ReadResult,
        MemoryService.read_memory,
        read_only=True,
    ),
    _tool(
        "pattern_pack",
        "Pack your working state",
        "When your context is nearly full: store your working state (summary, open work, decisions, files "
        "touched; scanned for secrets) as one memory, and get back what to start a fresh conversation with: "
        "the pack, then your hot memories and the work item's tree, within budget_tokens. One pack per work "
        "item (packing again writes its next version); team scope by default with a work_id, so the item's "
        "next attempt can restore it.",
        i.PackInput,
        r.PackResult,
        MemoryService.pack,
    ),
    _tool(
        "pattern_restore",
        "Restore a packed state",
        "Start a new conversation from a pack: by work_id (the newest pack of that item you can see) or "
        "pack_id; returns the pack, your hot memories and the work item's tree, within budget_tokens.",
        i.RestoreInput,
        r.PackResult,
        MemoryService.restore,
        read_only=True,
    ),
    _tool(
        "pattern_health",
        "Memory health",
        "Connection state, identity, buckets, index size, TTL mode and limits. Answers even while NATS is "
        "unreachable.",
        i.HealthInput,
        r.HealthResult,
        answer=_health,
        read_only=True,
        idempotent=True,
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)


def pattern_tools(
    get_service: GetService, *, health: HealthFallback | None = None, until_ready: UntilReady | None = None
) -> list[Tool]:
    """The 18 ``pattern_*`` tools, for ``MCPServer(tools=...)``.

    ``get_service`` is called on every tool call and must return a started
    :class:`MemoryService` or raise :class:`UnavailableError` saying why
    (tools then answer with that error, after ``until_ready`` when given: a bounded wait
    for a service still loading). ``health`` describes the state for ``pattern_health``
    while there is no service yet (it never waits).
    """
    host = ToolHost(server="Pattern", validation_code=InvalidInputError.code, log=log)
    return build_tools(TOOLS, Memory(get_service, health, until_ready), host)
