"""The stored memory record and the vocabulary around it (scopes, categories)."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from shared.models import Scope, new_id, utcnow
from shared.names import AGENT_ID_PATTERN, AGENT_ID_RULE, ID_PATTERN, USER_ID_PATTERN, USER_ID_RULE, anchored

__all__ = [
    "CATEGORY_RANK",
    "EXPIRING",
    "MEMORY_ID_PATTERN",
    "PERSONAL_SCOPES",
    "SHARED_CATEGORIES",
    "Category",
    "MemoryId",
    "MemoryRecord",
    "Scope",
    "Tag",
    "new_id",
    "utcnow",
]


class Category(StrEnum):
    RECENT = "recent"
    TASKS = "tasks"
    LONGTERM = "longterm"
    CORE = "core"
    DECISIONS = "decisions"
    ARCHITECTURE = "architecture"
    LEARNINGS = "learnings"


EXPIRING: Final = frozenset({Category.RECENT, Category.TASKS})
"""Categories that expire after the temporary TTL (24 h)."""

SHARED_CATEGORIES: Final = frozenset({Category.DECISIONS, Category.ARCHITECTURE, Category.LEARNINGS})

CATEGORY_RANK: Final[dict[Category, int]] = {
    Category.CORE: 0,
    Category.LONGTERM: 1,
    Category.DECISIONS: 2,
    Category.ARCHITECTURE: 2,
    Category.LEARNINGS: 2,
    Category.RECENT: 3,
    Category.TASKS: 4,
}
"""Recall order: core > longterm > shared (decisions, architecture, learnings) > recent > tasks."""

PERSONAL_SCOPES: Final = frozenset({Scope.PRIVATE, Scope.PERSONAL})
"""Scopes a core memory may live in: core memories belong to one agent (or its user)."""

MEMORY_ID_PATTERN: Final = anchored(ID_PATTERN)
TAG_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
METADATA_KEY_PATTERN: Final = r"^[A-Za-z0-9_.-]{1,64}$"

MemoryId = Annotated[
    str,
    StringConstraints(pattern=MEMORY_ID_PATTERN),
    Field(description="A memory id: 32 lowercase hex characters, as returned by the remember tools."),
]
Tag = Annotated[str, StringConstraints(pattern=TAG_PATTERN)]
MetadataKey = Annotated[str, StringConstraints(pattern=METADATA_KEY_PATTERN)]
MetadataValue = Annotated[str, StringConstraints(max_length=1024)]

_AGENT = re.compile(AGENT_ID_PATTERN)
_USER = re.compile(USER_ID_PATTERN)


def normalize_tags(tags: list[str]) -> list[str]:
    """Tags compare case-insensitively; store them lower-cased, de-duplicated, in order."""
    seen: dict[str, None] = {}
    for tag in tags:
        seen.setdefault(tag.lower(), None)
    return list(seen)


class MemoryRecord(BaseModel):
    """What one KV value holds (JSON). ``v`` versions the stored format."""

    model_config = ConfigDict(extra="ignore")

    v: Literal[1] = 1
    id: Annotated[str, StringConstraints(pattern=MEMORY_ID_PATTERN)] = Field(default_factory=new_id)
    scope: Scope
    category: Category
    content: str
    tags: list[str] = Field(default_factory=list)
    priority: int = Field(default=5, ge=1, le=10)
    metadata: dict[str, str] = Field(default_factory=dict)
    agent_id: str
    project_id: str
    user_id: str
    handle: str = ""
    parent_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime | None = None
    source_id: str | None = None
    """The memory this one was shared or imported from."""
    version: int = Field(default=1, ge=1)
    """Bumped by every write to this id (pattern_remember with memory_id, commit_insight)."""
    updated_by: str | None = None
    """The agent that wrote this version (None: its creator)."""
    access_count: int = Field(default=0, ge=0)
    """Reads of it (recall, read by id), as Pattern's sweeps wrote them back."""
    accessed_at: datetime | None = None
    """Its last read (None: never read)."""

    @field_validator("agent_id", "parent_id")
    @classmethod
    def _agent(cls, value: str | None) -> str | None:
        if value is not None and not _AGENT.fullmatch(value):
            raise ValueError(f"must be {AGENT_ID_RULE}")
        return value

    @field_validator("user_id")
    @classmethod
    def _user(cls, value: str) -> str:
        if not _USER.fullmatch(value):
            raise ValueError(f"must be {USER_ID_RULE}")
        return value

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    @property
    def rank(self) -> int:
        return CATEGORY_RANK[self.category]
