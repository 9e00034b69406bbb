"""The compaction pack (docs/pattern.md, Packing a conversation): the context loop of
the supervision design, for an agent whose context window is nearly full.

``pattern_pack`` stores the agent's working state (its summary, the open work, what it
decided, the files it touched; bounded and scanned for secrets) as one memory, a
"flash save", and returns what a fresh conversation should start with: the pack, then
the **hot** tier of the agent's memories and the work item's context tree, within a
stated budget. ``pattern_restore`` returns the same for a stored pack, by its id or by
the work item (the item's next attempt, by any agent of the project, for a team pack).

One pack per agent and item (its id is derived from both): packing again writes the
pack's next version.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Protocol

from pattern.access import Viewer
from pattern.build import Candidate, line
from pattern.config import PatternConfig
from pattern.errors import InvalidInputError, NotFoundError
from pattern.index import MemoryIndex
from pattern.inputs import BuildContextInput, PackInput, RememberInput, RestoreInput
from pattern.models import Category, Scope
from pattern.results import (
    BuildContextResult,
    BuiltItem,
    ChatMessage,
    MemoryView,
    PackResult,
    ReadResult,
    RememberResult,
)
from pattern.sweep import AccessLog
from shared.context import tokens
from shared.context.store import ContextStore
from shared.identity import Identity


class PackHost(Protocol):
    """What packing needs from the memory service (``MemoryService``)."""

    @property
    def identity(self) -> Identity: ...

    @property
    def agent_id(self) -> str: ...

    @property
    def config(self) -> PatternConfig: ...

    @property
    def index(self) -> MemoryIndex: ...

    @property
    def viewer(self) -> Viewer: ...

    @property
    def accesses(self) -> AccessLog: ...

    def now(self) -> datetime: ...

    def contexts(self) -> ContextStore: ...

    def read_by_id(self, memory_id: str, field: str = "memory_id") -> ReadResult: ...

    async def remember(self, req: RememberInput) -> RememberResult: ...

    async def build_context(self, req: BuildContextInput) -> BuildContextResult: ...


PACK_TAG = "pack"
KIND = "pack"


def pack_id(agent_id: str, work_id: str | None) -> str:
    raw = f"loom-pack\0{agent_id}\0{work_id or ''}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def render(req: PackInput, handle: str) -> str:
    def listed(title: str, items: list[str]) -> str:
        return f"## {title}\n" + "".join(f"- {' '.join(i.split())}\n" for i in items) if items else ""

    head = f"# Working state packed by {handle}" + (f" for work item {req.work_id}" if req.work_id else "")
    parts = [
        head,
        f"## Summary\n{req.summary.strip()}\n",
        listed("Open work", req.open_work),
        listed("Decisions", req.decisions),
        listed("Files touched", req.files),
    ]
    return "\n".join(p for p in parts if p)


async def pack(service: PackHost, req: PackInput) -> PackResult:
    if req.work_id is not None and not (await service.contexts().tree(req.work_id)).exists:
        raise NotFoundError("no work item context with this id in this project", field="work_id")
    content = render(req, service.identity.handle or service.agent_id[:8])
    limit = service.config.limits.max_content_bytes
    size = len(content.encode("utf-8"))
    if size > limit:
        raise InvalidInputError(
            f"the pack would be {size} bytes; a memory holds at most {limit} (shorten the summary or lists)",
            field="summary",
        )
    scope = Scope(req.scope) if req.scope else (Scope.TEAM if req.work_id else Scope.PRIVATE)
    metadata = {"kind": KIND, **({"work_id": req.work_id} if req.work_id else {})}
    stored = await service.remember(
        RememberInput(
            content=content,
            category=Category.LONGTERM,
            scope=scope,
            tags=[PACK_TAG],
            priority=9,
            metadata=metadata,
            memory_id=pack_id(service.agent_id, req.work_id),
        )
    )
    context = await fresh_context(service, stored.memory, req.work_id, req.budget_tokens, req.shape)
    return PackResult(pack=stored.memory, context=context, warnings=stored.warnings)


async def restore(service: PackHost, req: RestoreInput) -> PackResult:
    if req.pack_id is not None:
        found = service.read_by_id(req.pack_id, field="pack_id").memory
        if found.metadata.get("kind") != KIND:
            raise NotFoundError("is not a pack (pattern_pack stores them)", field="pack_id")
    else:
        found = newest_pack(service, req.work_id)
    return PackResult(
        pack=found,
        context=await fresh_context(
            service, found, found.metadata.get("work_id"), req.budget_tokens, req.shape
        ),
    )


def newest_pack(service: PackHost, work_id: str | None) -> MemoryView:
    now = service.now()
    candidates = [
        e
        for e in (service.index.entry(uid) for uid in service.index.tagged([PACK_TAG]) or ())
        if e is not None
        and e.record.metadata.get("kind") == KIND
        and e.record.metadata.get("work_id") == work_id
        and service.viewer.can_read(e.parts)
        and not e.record.is_expired(now)
    ]
    if not candidates:
        raise NotFoundError("no pack for this work item that you can see", field="work_id")
    newest = max(candidates, key=lambda e: (e.record.updated_at, e.revision))
    service.accesses.touch([newest], now)
    return MemoryView.of(newest.record, service.agent_id)


async def fresh_context(
    service: PackHost, found: MemoryView, work_id: str | None, budget: int, shape: str
) -> BuildContextResult:
    """The pack first, then the hot tier and the work item's tree, within ``budget``."""
    counter = tokens.counter()
    first = Candidate("pack", found.id, KIND, found.content, counter.count(line("pack", KIND, found.content)))
    if first.tokens > budget:
        raise InvalidInputError(
            f"the pack alone takes {first.tokens} tokens; give a budget of at least that",
            field="budget_tokens",
        )
    head = BuiltItem(layer="pack", id=first.id, kind=KIND, tokens=first.tokens, text=first.text)
    rest = budget - first.tokens
    if rest < BuildContextInput.model_fields["budget_tokens"].metadata[0].ge:
        return BuildContextResult(
            counter=counter.name,
            budget_tokens=budget,
            used_tokens=first.tokens,
            context=line("pack", KIND, first.text),
            items=[head],
            layers=[],
            omitted=[],
            omitted_total=0,
        )
    built = await service.build_context(
        BuildContextInput(
            budget_tokens=rest, work_id=work_id, tiers=["hot"], shape="chat" if shape == "chat" else "text"
        )
    )
    update: dict[str, object] = {
        "budget_tokens": budget,
        "used_tokens": built.used_tokens + first.tokens,
        "context": line("pack", KIND, first.text) + built.context,
        "items": [head, *built.items],
    }
    if built.chat is not None:
        restored = ChatMessage(
            role="user", content=f"Your working state, restored from a pack:\n{first.text}"
        )
        update["chat"] = built.chat.model_copy(update={"messages": [restored, *built.chat.messages]})
    return built.model_copy(update=update)
