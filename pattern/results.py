"""Tool results: structured output (these models are the MCP output schemas)
plus a readable rendering in :meth:`text`."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from pattern.models import Category, MemoryRecord, Scope


def _short(memory_id: str) -> str:
    return memory_id[:8]


def _when(value: datetime | None) -> str:
    return "never" if value is None else value.strftime("%Y-%m-%d %H:%M:%SZ")


class MemoryView(BaseModel):
    """A memory as an agent sees it."""

    id: str
    scope: Scope
    category: Category
    content: str
    tags: list[str]
    priority: int
    metadata: dict[str, str]
    agent_id: str = Field(description="The agent that created it.")
    handle: str
    project_id: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    source_id: str | None = Field(description="The memory this was shared or imported from.")
    own: bool = Field(description="True when you created it.")
    version: int = Field(1, description="Bumped by every write to this id.")
    updated_by: str | None = Field(None, description="Who wrote this version (null: its creator).")
    access_count: int = Field(0, description="Reads of it written back by Pattern's sweeps.")
    accessed_at: datetime | None = Field(None, description="Its last read written back (null: never).")
    tier: str | None = Field(None, description="hot, warm or cold: its importance now (docs/pattern.md).")

    @classmethod
    def of(cls, record: MemoryRecord, agent_id: str) -> MemoryView:
        return cls.model_construct(
            id=record.id,
            scope=record.scope,
            category=record.category,
            content=record.content,
            tags=record.tags,
            priority=record.priority,
            metadata=record.metadata,
            agent_id=record.agent_id,
            handle=record.handle,
            project_id=record.project_id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            expires_at=record.expires_at,
            source_id=record.source_id,
            own=record.agent_id == agent_id,
            version=record.version,
            updated_by=record.updated_by,
            access_count=record.access_count,
            accessed_at=record.accessed_at,
            tier=None,
        )

    def label(self) -> str:
        return f"{self.id} ({self.scope.value}/{self.category.value})"


class RememberResult(BaseModel):
    memory: MemoryView
    warnings: list[str] = Field(default_factory=list)

    def text(self) -> str:
        m = self.memory
        expiry = f", expires {_when(m.expires_at)}" if m.expires_at else ""
        lines = [f"Remembered {m.label()}, priority {m.priority}{expiry}."]
        lines += [f"Warning: {w}" for w in self.warnings]
        return "\n".join(lines)


class CommitInsightResult(BaseModel):
    memory: MemoryView
    previous_category: Category

    def text(self) -> str:
        old = self.previous_category.value
        return f"Committed {self.memory.id} from {old} to longterm; it no longer expires."


class ForgetResult(BaseModel):
    memory_id: str
    scope: Scope
    category: Category
    forgotten: bool = True

    def text(self) -> str:
        return f"Forgot {self.memory_id} ({self.scope.value}/{self.category.value})."


class RecallCounts(BaseModel):
    returned: int
    has_more: bool = Field(description="More memories match than were returned (raise limit or narrow).")
    visible: int = Field(description="Memories you can see in the requested scopes and categories.")
    by_category: dict[str, int]
    by_scope: dict[str, int]
    expired_recently: int = Field(
        description="Memories in the requested scopes and categories that expired within the expiry window."
    )
    expired_window_s: int


class RecallResult(BaseModel):
    memories: list[MemoryView]
    summary: str = Field(description="A readable digest of the returned memories, at most 4 KB.")
    counts: RecallCounts

    def text(self) -> str:
        return self.summary


class ShareResult(BaseModel):
    memory: MemoryView
    source_id: str
    mode: Literal["copy", "move"]
    warnings: list[str] = Field(default_factory=list)

    def text(self) -> str:
        verb = "Copied" if self.mode == "copy" else "Moved"
        lines = [f"{verb} {self.source_id} to {self.memory.label()}."]
        lines += [f"Warning: {w}" for w in self.warnings]
        return "\n".join(lines)


class CleanupResult(BaseModel):
    dry_run: bool
    removed: list[str] = Field(description="Ids removed (or that would be, on a dry run).")
    count: int

    def text(self) -> str:
        verb = "Would remove" if self.dry_run else "Removed"
        ids = ", ".join(_short(i) for i in self.removed[:20])
        more = f" and {self.count - 20} more" if self.count > 20 else ""
        return f"{verb} {self.count} of your memories" + (f": {ids}{more}." if self.count else ".")


class ExportResult(BaseModel):
    path: str
    count: int
    format: str
    version: int

    def text(self) -> str:
        return f"Exported {self.count} memories to {self.path} ({self.format} v{self.version})."


class SkippedRecord(BaseModel):
    index: int
    original_id: str | None
    reason: str


class ImportResult(BaseModel):
    path: str
    dry_run: bool
    imported: int
    memory_ids: list[str]
    skipped: list[SkippedRecord]
    warnings: list[str] = Field(default_factory=list)

    def text(self) -> str:
        verb = "Would import" if self.dry_run else "Imported"
        lines = [f"{verb} {self.imported} memories from {self.path}; skipped {len(self.skipped)}."]
        lines += [f"Skipped #{s.index} ({s.original_id or '?'}): {s.reason}" for s in self.skipped[:50]]
        if len(self.skipped) > 50:
            lines.append(f"... and {len(self.skipped) - 50} more skipped")
        lines += [f"Warning: {w}" for w in self.warnings[:50]]
        return "\n".join(lines)


class BulkRememberItem(BaseModel):
    index: int
    memory_id: str | None = None
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)


class BulkRememberResult(BaseModel):
    stored: int
    failed: int
    items: list[BulkRememberItem]

    def text(self) -> str:
        lines = [f"Stored {self.stored} memories; {self.failed} failed."]
        for item in self.items:
            if item.error:
                lines.append(f"#{item.index}: {item.error}")
            for w in item.warnings:
                lines.append(f"#{item.index} warning: {w}")
        return "\n".join(lines)


class BulkForgetItem(BaseModel):
    memory_id: str
    forgotten: bool
    error: str | None = None


class BulkForgetResult(BaseModel):
    forgotten: int
    failed: int
    items: list[BulkForgetItem]

    def text(self) -> str:
        lines = [f"Forgot {self.forgotten} memories; {self.failed} failed."]
        lines += [f"{i.memory_id}: {i.error}" for i in self.items if i.error]
        return "\n".join(lines)


class HealthIdentity(BaseModel):
    agent_id: str
    project_id: str
    user_id: str
    handle: str
    parent_id: str | None
    subagent_type: str | None


class HealthResult(BaseModel):
    status: Literal["ok", "starting", "unavailable"]
    nats_url: str
    connected: bool
    error: str | None = None
    identity: HealthIdentity | None = None
    buckets: dict[str, str] = Field(default_factory=dict)
    index_ready: bool = False
    memories_indexed: int = 0
    own_memories: int = 0
    server_ttl: bool | None = None
    temporary_ttl_s: int | None = None
    secret_scan: str | None = None
    export_dir: str | None = None
    limits: dict[str, int] = Field(default_factory=dict)

    def text(self) -> str:
        state = "connected" if self.connected else "not connected"
        lines = [f"Pattern {self.status}: NATS {self.nats_url} ({state})"]
        if self.error:
            lines.append(f"Error: {self.error}")
        if self.identity is not None:
            i = self.identity
            parent = f", sub-agent of {i.parent_id}" if i.parent_id else ""
            lines.append(f"Agent {i.agent_id} ({i.handle}) in project {i.project_id}{parent}")
        if self.buckets:
            lines.append("Buckets: " + ", ".join(f"{k}={v}" for k, v in self.buckets.items()))
        if self.status == "ok":
            lines.append(
                f"Index: {self.memories_indexed} memories visible, {self.own_memories} yours; "
                f"server TTL {'on' if self.server_ttl else 'off (cleanup removes expired)'}; "
                f"temporary TTL {self.temporary_ttl_s}s; secret scan {self.secret_scan}"
            )
        return "\n".join(lines)


class BuiltItem(BaseModel):
    layer: str
    id: str = Field(description="The memory id, or the context node id for the work layer")
    kind: str = Field(description="The memory's category, or the node's kind")
    tokens: int
    text: str


class LayerUse(BaseModel):
    layer: str
    share: float = Field(description="Its share of the budget after layers with nothing were left out")
    allotted: int
    used: int
    items: int
    considered: int
    omitted: int
    available: int


class OmittedItem(BaseModel):
    layer: str
    id: str
    reason: str
    tier: str | None = Field(None, description="hot, warm or cold for a memory; null for a work node")


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class ChatContext(BaseModel):
    """The built context in the shape chat hosts take: a system prompt and messages."""

    system: str = Field(description="What the agent is and knows: its memories, layer by layer")
    messages: list[ChatMessage] = Field(description="The work so far (and a restored pack), as user messages")


class BuildContextResult(BaseModel):
    counter: str = Field(description="The tokenizer that counted")
    budget_tokens: int
    used_tokens: int = Field(description="Tokens of `context`, counted whole")
    context: str = Field(description="What to load: one line per item, highest priority layer first")
    items: list[BuiltItem]
    layers: list[LayerUse] = Field(description="The policy as applied: allowance and use per layer")
    omitted: list[OmittedItem] = Field(description=f"The first {50} items left out and why")
    omitted_total: int = Field(description="Everything left out, including items no layer reached")
    omitted_by_tier: dict[str, int] = Field(
        default_factory=dict,
        description="Memories the build looked at and left out, per tier (unreached ones are counted in "
        "each layer's omitted: the same tier as the last one looked at, or lower)",
    )
    chat: ChatContext | None = Field(None, description="With shape chat: the same items as system + messages")

    def text(self) -> str:
        head = (
            f"Context: {self.used_tokens} of {self.budget_tokens} tokens ({self.counter}), "
            f"{len(self.items)} items, {self.omitted_total} left out."
        )
        uses = ", ".join(f"{u.layer} {u.used}/{u.allotted} ({u.items})" for u in self.layers if u.available)
        reasons: dict[str, int] = {}
        for item in self.omitted:
            reasons[item.reason] = reasons.get(item.reason, 0) + 1
        why = "; ".join(f"{n} {reason}" for reason, n in reasons.items())
        return "\n".join(
            part for part in (head, f"Layers: {uses}" if uses else "", why, self.context) if part
        )


class ReadResult(BaseModel):
    memory: MemoryView
    found_in: str = Field(
        description="Where the scope order found it: own, inherited, team, personal or public"
    )

    def text(self) -> str:
        m = self.memory
        return (
            f"{m.label()} v{m.version}, found in {self.found_in}, tier {m.tier}"
            f"{'' if m.own else ' by ' + (m.handle or m.agent_id[:8])}:\n{m.content}"
        )


class PackResult(BaseModel):
    """A packed (or restored) working state and the context to start a new conversation with."""

    pack: MemoryView = Field(description="The pack as stored (a longterm memory tagged pack)")
    context: BuildContextResult = Field(
        description="The pack first, then your memories' hot tier and the work item's tree, within budget"
    )
    warnings: list[str] = Field(default_factory=list)

    def text(self) -> str:
        c = self.context
        head = (
            f"Pack {self.pack.id} v{self.pack.version} ({self.pack.scope.value}). "
            f"Start the new conversation with this context: {c.used_tokens} of {c.budget_tokens} tokens."
        )
        return "\n".join([head, *self.warnings, c.context])
