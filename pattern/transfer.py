"""Export and import of memories as versioned JSON files.

Files live in one directory (``PATTERN_EXPORT_DIR``, default
``<project>/.loom/memory-exports``); a path that resolves outside it (``..``,
symlinks) is refused. The TypeScript Pattern's export files are imported too,
read with their meaning (:func:`from_original`). Import re-homes every record under the importing agent,
project and user — whatever agent the file claims — so an import can never
write into another agent's space; each record is validated on its own and
the bad ones are reported, not silently dropped.

This module does not import the memory service: it states what it needs from it
(:class:`TransferHost`), and ``pattern.service.MemoryService`` provides that and calls in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

from pattern.config import PatternConfig
from pattern.errors import InvalidInputError, LimitExceededError, PatternError
from pattern.index import Entry, MemoryIndex
from pattern.inputs import Content, ExportInput, ImportInput, InputModel, Metadata, Priority, Tags, _utc
from pattern.models import EXPIRING, MEMORY_ID_PATTERN, PERSONAL_SCOPES, Category, MemoryRecord, Scope
from pattern.results import ExportResult, ImportResult, SkippedRecord
from shared.errors import Unavailable, describe_problems, validation_problems
from shared.identity import Identity
from shared.legacy import ORIGINAL_PRIORITY


class TransferHost(Protocol):
    """What export and import need from the memory service (``MemoryService``)."""

    @property
    def config(self) -> PatternConfig: ...

    @property
    def identity(self) -> Identity: ...

    @property
    def index(self) -> MemoryIndex: ...

    @property
    def agent_id(self) -> str: ...

    def now(self) -> datetime: ...

    def own_entries(self) -> list[Entry]:
        """The caller's own memories that have not expired."""
        ...

    def scan_secrets(self, text: str, field: str = "content") -> list[str]:
        """Warnings for secrets in ``text`` (or an error, as the scan mode says)."""
        ...

    async def store_imported(self, record: MemoryRecord, *, dry_run: bool, planned: Counter[str]) -> None:
        """Check the limits for one re-homed record and, unless ``dry_run``, write it."""
        ...


EXPORT_FORMAT = "loom-pattern-memories"
EXPORT_VERSION = 1


class ExportedMemory(InputModel):
    """One record of an export file, as import accepts it. Owner fields in the
    file (agent, project, user) are read only to warn; they are never used."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, StringConstraints(pattern=MEMORY_ID_PATTERN)] | None = None
    scope: Scope
    category: Category
    content: Content
    tags: Tags = []
    priority: Priority = 5
    metadata: Metadata = {}
    created_at: datetime | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    agent_id: str | None = Field(default=None, max_length=64)

    @field_validator("created_at", "updated_at", "expires_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @model_validator(mode="after")
    def _core_scope(self) -> ExportedMemory:
        if self.category is Category.CORE and self.scope not in PERSONAL_SCOPES:
            raise ValueError("scope: core memories must be private or personal")
        return self


def resolve_in(root: Path, relative: str, field: str = "path") -> Path:
    """``relative`` inside ``root``, or an error naming the field; symlinks are resolved first."""
    if os.path.isabs(relative):
        raise InvalidInputError(f"must be relative to the export directory {root}", field=field)
    root_real = Path(os.path.realpath(root))
    target = Path(os.path.realpath(root_real / relative))
    if target == root_real or not target.is_relative_to(root_real):
        raise InvalidInputError(f"must stay inside the export directory {root}", field=field)
    return target


def _write_atomic(path: Path, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".export-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def export_memories(service: TransferHost, req: ExportInput) -> ExportResult:
    root = service.config.export_root(service.identity.project_path)
    now = service.now()
    name = req.path or f"memories-{service.agent_id[:12]}-{now.strftime('%Y%m%dT%H%M%S')}.json"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PatternError(f"cannot create the export directory {root}: {exc.strerror}") from None
    target = resolve_in(root, name)
    scopes = set(req.scopes or Scope)
    categories = set(req.categories or Category)
    entries = [e for e in service.own_entries() if e.parts.scope in scopes and e.parts.category in categories]
    entries.sort(key=lambda e: (e.record.created_at, e.record.id))
    memories = [e.record.model_dump(mode="json", exclude={"v"}) for e in entries]
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": now.isoformat(),
        "exported_by": {
            "agent_id": service.agent_id,
            "project_id": service.identity.project_id,
            "user_id": service.identity.user_id,
            "handle": service.identity.handle,
        },
        "count": len(memories),
        "memories": memories,
    }
    payload = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
    try:
        await asyncio.to_thread(_write_atomic, target, payload)
    except OSError as exc:
        raise PatternError(f"path: cannot write {target}: {exc.strerror}") from None
    return ExportResult(path=str(target), count=len(memories), format=EXPORT_FORMAT, version=EXPORT_VERSION)


def _read(path: Path, limit: int) -> Any:
    size = path.stat().st_size
    if size > limit:
        raise InvalidInputError(f"file is {size} bytes; imports are limited to {limit} bytes", field="path")
    try:
        return json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"is not valid JSON: {exc}", field="path") from None


def _describe(exc: ValidationError) -> str:
    return describe_problems(validation_problems(exc.errors()), limit=20)


def imported_id(agent_id: str, original: str) -> str:
    """Stable per (importer, original) so importing the same file twice adds nothing."""
    return hashlib.sha256(f"loom-import\0{agent_id}\0{original}".encode()).hexdigest()[:32]


async def import_memories(service: TransferHost, req: ImportInput) -> ImportResult:
    root = service.config.export_root(service.identity.project_path)
    path = resolve_in(root, req.path)
    if not path.is_file():
        raise InvalidInputError(f"no such file in the export directory {root}", field="path")
    document = await asyncio.to_thread(_read, path, service.config.limits.max_import_bytes)
    if not isinstance(document, dict):
        raise InvalidInputError(
            "the file must hold a JSON object with format, version and memories", field="path"
        )
    typescript = is_original_export(document)
    if not typescript and document.get("format") != EXPORT_FORMAT:
        raise InvalidInputError(f"the file's format must be {EXPORT_FORMAT!r}", field="path")
    if not typescript and document.get("version") != EXPORT_VERSION:
        raise InvalidInputError(f"the file's version must be {EXPORT_VERSION}", field="path")
    records = document.get("memories")
    if not isinstance(records, list):
        raise InvalidInputError("the file's memories must be a list", field="path")
    if typescript:
        records = [from_original(raw) for raw in records]

    now = service.now()
    me = service.agent_id
    skipped: list[SkippedRecord] = []
    warnings: list[str] = []
    ids: list[str] = []
    foreign = 0
    planned: Counter[str] = Counter()
    for i, raw in enumerate(records):
        original = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else None
        try:
            item = ExportedMemory.model_validate(raw)
        except ValidationError as exc:
            skipped.append(SkippedRecord(index=i, original_id=original, reason=_describe(exc)))
            continue
        if item.agent_id is not None and item.agent_id != me:
            foreign += 1
        try:
            record = _rehome(service, item, now)
        except PatternError as exc:
            skipped.append(SkippedRecord(index=i, original_id=original, reason=str(exc)))
            continue
        if item.id is not None and any(e.parts.owner == me for e in service.index.get(item.id)):
            skipped.append(
                SkippedRecord(index=i, original_id=original, reason=f"already present as {item.id}")
            )
            continue
        if service.index.get(record.id):
            skipped.append(
                SkippedRecord(index=i, original_id=original, reason=f"already imported as {record.id}")
            )
            continue
        try:
            found = service.scan_secrets(record.content, field=f"memories.{i}.content")
            await service.store_imported(record, dry_run=req.dry_run, planned=planned)
        except LimitExceededError as exc:
            skipped.append(SkippedRecord(index=i, original_id=original, reason=str(exc)))
            continue
        except PatternError as exc:
            if isinstance(exc, Unavailable):
                raise
            skipped.append(SkippedRecord(index=i, original_id=original, reason=str(exc)))
            continue
        warnings += found
        ids.append(record.id)
    if foreign:
        warnings.insert(
            0,
            f"{foreign} records were exported by another agent; they were imported as yours "
            f"(agent {me}, project {service.identity.project_id})",
        )
    return ImportResult(
        path=str(path),
        dry_run=req.dry_run,
        imported=len(ids),
        memory_ids=ids,
        skipped=skipped,
        warnings=warnings,
    )


ORIGINAL_EXPORT_VERSION = "1.0"
"""The TypeScript Pattern's export files: ``{"version": "1.0", "exportedAt", "projectId",
"agentId", "memories": [...]}`` with camelCase records and no ``format``."""


def is_original_export(document: dict[str, Any]) -> bool:
    return (
        "format" not in document
        and document.get("version") == ORIGINAL_EXPORT_VERSION
        and "exportedAt" in document
    )


def from_original(raw: object) -> object:
    """One record of the TypeScript Pattern's export in our record's terms, read with its
    meaning: its priority (1 high, 2 medium, 3 low; default 2) on our scale, its tags from
    its metadata, its uuid as 32 hex. What cannot be read is left for validation to report."""
    if not isinstance(raw, dict):
        return raw
    meta: dict[str, Any] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    converted: dict[str, Any] = {
        "scope": raw.get("scope"),
        "category": raw.get("category"),
        "content": raw.get("content"),
        "tags": meta.get("tags", []),
        "priority": _original_priority(meta.get("priority", 2)),
        "metadata": {},
        "created_at": raw.get("createdAt"),
        "updated_at": raw.get("updatedAt"),
        "expires_at": raw.get("expiresAt"),
        "agent_id": raw.get("agentId"),
    }
    if isinstance(meta.get("source"), str):
        converted["metadata"]["source"] = meta["source"]
    related = meta.get("relatedTo")
    if isinstance(related, list) and related:
        converted["metadata"]["related_to"] = ",".join(str(item) for item in related)
    identifier = raw.get("id")
    if isinstance(identifier, str):
        try:
            converted["id"] = uuid.UUID(identifier).hex
        except ValueError:
            converted["id"] = None
    return converted


def _original_priority(value: object) -> int:
    """1-3 on our scale; anything else 0, which validation refuses (never read as ours)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return ORIGINAL_PRIORITY.get(value, 0)
    return 0


def _rehome(service: TransferHost, item: ExportedMemory, now: datetime) -> MemoryRecord:
    """The record as the importing agent's own, in its project and user space."""
    original = item.id or hashlib.sha256(item.content.encode("utf-8")).hexdigest()[:32]
    expires_at: datetime | None = None
    if item.category in EXPIRING:
        ceiling = now + timedelta(seconds=service.config.temporary_ttl_s)
        expires_at = min(item.expires_at, ceiling) if item.expires_at is not None else ceiling
        if expires_at <= now:
            raise InvalidInputError(f"expired at {expires_at.isoformat()}", field="expires_at")
    created = item.created_at or now
    return MemoryRecord(
        id=imported_id(service.agent_id, original),
        scope=item.scope,
        category=item.category,
        content=item.content,
        tags=item.tags,
        priority=item.priority,
        metadata=item.metadata,
        agent_id=service.agent_id,
        project_id=service.identity.project_id,
        user_id=service.identity.user_id,
        handle=service.identity.handle,
        parent_id=service.identity.parent_id,
        created_at=created,
        updated_at=item.updated_at or created,
        expires_at=expires_at,
        source_id=item.id,
    )
