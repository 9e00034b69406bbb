"""Tool inputs. These models are the contract: the MCP layer publishes their
JSON schema in ``tools/list`` and validates arguments against them, and the
service validates them again, so what a client sees is what is enforced.

Rules a JSON schema cannot say (content size in bytes, min <= max) are in
the field descriptions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from pattern.models import (
    MEMORY_ID_PATTERN,
    PERSONAL_SCOPES,
    Category,
    MemoryId,
    MetadataKey,
    MetadataValue,
    Scope,
    Tag,
    normalize_tags,
)
from shared.legacy import metadata_advice

MAX_CONTENT_BYTES = 32 * 1024
MAX_TAGS = 20
MAX_METADATA = 20
MAX_BULK_REMEMBER = 100
MAX_BULK_FORGET = 500
MAX_RECALL = 200

Content = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CONTENT_BYTES,
        description="The memory text: 1 to 32,768 bytes of UTF-8 (32 KB).",
    ),
]
Tags = Annotated[
    list[Tag],
    Field(
        max_length=MAX_TAGS,
        description="Up to 20 tags (letters, digits, '_', '.', ':', '-'; 1-64 characters); "
        "stored lower-cased and matched case-insensitively.",
    ),
]
Priority = Annotated[int, Field(ge=1, le=10, description="1 (low) to 10 (high).")]
Metadata = Annotated[
    dict[MetadataKey, MetadataValue],
    Field(
        max_length=MAX_METADATA,
        description="Up to 20 string pairs; keys 1-64 of letters, digits, '_', '.', '-'; values up to 1024.",
    ),
]
Timestamp = Annotated[
    datetime | None,
    Field(description="ISO 8601 date-time; without a timezone it is taken as UTC."),
]


class InputModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("content", check_fields=False)
    @classmethod
    def _content_bytes(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode("utf-8")) > MAX_CONTENT_BYTES:
            raise ValueError(
                f"must be at most {MAX_CONTENT_BYTES} bytes of UTF-8 (32 KB); "
                f"got {len(value.encode('utf-8'))} bytes"
            )
        return value

    @field_validator("tags", check_fields=False)
    @classmethod
    def _tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else normalize_tags(value)


class _NewMemory(InputModel):
    content: Content
    tags: Tags = []
    priority: Priority = 5
    metadata: Metadata = {}

    @field_validator("metadata", mode="before")
    @classmethod
    def _not_the_originals(cls, value: object) -> object:
        """The TypeScript Pattern kept tags and priority (1 high ... 3 low) in metadata;
        such a key is refused with the argument to use, never stored as a plain pair."""
        if isinstance(value, dict):
            for key in value:
                advice = metadata_advice(key) if isinstance(key, str) else None
                if advice is not None:
                    raise ValueError(advice)
        return value


class RememberInput(_NewMemory):
    category: Annotated[
        Category,
        Field(
            description="recent and tasks expire after 24 h; longterm, core, decisions, architecture "
            "and learnings do not. core memories must be private or personal."
        ),
    ] = Category.RECENT
    scope: Annotated[
        Scope,
        Field(
            description="private: only you (and your sub-agents); personal: you in any project; "
            "team: everyone in this project; public: everyone."
        ),
    ] = Scope.PRIVATE
    memory_id: MemoryId | None = Field(
        default=None,
        description="Write a new version of this memory (yours, or a team or public one; its scope and "
        "category stay), or create one with this id. Omit for a new memory.",
    )

    @model_validator(mode="after")
    def _core_scope(self) -> RememberInput:
        if self.category is Category.CORE and self.scope not in PERSONAL_SCOPES:
            raise ValueError("scope: core memories must be private or personal (use pattern_core_memory)")
        return self


class RememberTaskInput(_NewMemory):
    scope: Annotated[Scope, Field(description="Where the task memory lives (default private).")] = (
        Scope.PRIVATE
    )


class RememberLearningInput(_NewMemory):
    scope: Annotated[
        Scope,
        Field(description="Default private; share later with pattern_share_learning, or store as team now."),
    ] = Scope.PRIVATE


class CoreMemoryInput(_NewMemory):
    priority: Priority = 8
    scope: Annotated[
        Literal["private", "personal"],
        Field(description="private (this project) or personal (follows you across projects)."),
    ] = "private"


class CommitInsightInput(InputModel):
    memory_id: MemoryId
    content: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=MAX_CONTENT_BYTES,
            description="Optional replacement text (the distilled insight), at most 32 KB of UTF-8.",
        ),
    ] = None
    tags: Annotated[
        list[Tag] | None,
        Field(max_length=MAX_TAGS, description="Optional tags to add (the total stays at most 20)."),
    ] = None
    priority: Annotated[int | None, Field(ge=1, le=10, description="Optional new priority 1-10.")] = None


class ForgetInput(InputModel):
    memory_id: MemoryId
    force: Annotated[bool, Field(description="Required to forget a core memory.")] = False


def _utc(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class RecallInput(InputModel):
    scopes: Annotated[
        list[Scope] | None,
        Field(max_length=4, description="Only these scopes (default: all you can see)."),
    ] = None
    categories: Annotated[
        list[Category] | None,
        Field(max_length=7, description="Only these categories (default: all)."),
    ] = None
    tags: Annotated[
        list[Tag],
        Field(max_length=MAX_TAGS, description="Memories must carry all of these tags (case-insensitive)."),
    ] = []
    priority_min: Annotated[int, Field(ge=1, le=10, description="Lowest priority to include.")] = 1
    priority_max: Annotated[
        int, Field(ge=1, le=10, description="Highest priority to include; must be >= priority_min.")
    ] = 10
    created_after: Timestamp = None
    created_before: Timestamp = None
    updated_after: Timestamp = None
    updated_before: Timestamp = None
    search: Annotated[
        str | None,
        Field(min_length=1, max_length=256, description="Case-insensitive text to find in content or tags."),
    ] = None
    limit: Annotated[int, Field(ge=1, le=MAX_RECALL, description="At most this many memories (1-200).")] = 50

    @field_validator("created_after", "created_before", "updated_after", "updated_before")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @model_validator(mode="after")
    def _ranges(self) -> RecallInput:
        if self.priority_min > self.priority_max:
            raise ValueError(
                f"priority_min: must be <= priority_max (got {self.priority_min} > {self.priority_max})"
            )
        for lo, hi in (("created_after", "created_before"), ("updated_after", "updated_before")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{lo}: must not be later than {hi}")
        return self


class ShareLearningInput(InputModel):
    memory_id: MemoryId
    scope: Annotated[
        Literal["team", "public"], Field(description="team (this project, default) or public (everyone).")
    ] = "team"
    mode: Annotated[
        Literal["copy", "move"],
        Field(
            description="copy keeps your memory and adds a shared one; move turns yours into the shared one."
        ),
    ] = "copy"
    category: Annotated[
        Literal["decisions", "architecture", "learnings"] | None,
        Field(description="Category of the shared memory (default: learnings unless it already is shared)."),
    ] = None


class CleanupInput(InputModel):
    dry_run: Annotated[bool, Field(description="Report what would be removed without removing it.")] = False
    older_than_hours: Annotated[
        float | None,
        Field(
            ge=0,
            le=8760,
            description="Also remove your recent/tasks memories created more than this many hours ago.",
        ),
    ] = None
    categories: Annotated[
        list[Literal["recent", "tasks"]],
        Field(min_length=1, max_length=2, description="Which temporary categories to clean."),
    ] = ["recent", "tasks"]


ExportPath = Annotated[
    str,
    StringConstraints(min_length=6, max_length=255, pattern=r"^[A-Za-z0-9_.-][A-Za-z0-9_./-]*\.json$"),
    Field(description="A .json file name relative to the export directory (PATTERN_EXPORT_DIR)."),
]


class ExportInput(InputModel):
    path: Annotated[
        ExportPath | None,
        Field(
            description="File name relative to the export directory; default memories-<agent>-<time>.json."
        ),
    ] = None
    scopes: Annotated[list[Scope] | None, Field(max_length=4, description="Only these scopes.")] = None
    categories: Annotated[
        list[Category] | None, Field(max_length=7, description="Only these categories.")
    ] = None


class ImportInput(InputModel):
    path: ExportPath
    dry_run: Annotated[bool, Field(description="Validate and report without writing.")] = False


class BulkMemory(_NewMemory):
    category: Category = Category.RECENT
    scope: Scope = Scope.PRIVATE

    @model_validator(mode="after")
    def _core_scope(self) -> BulkMemory:
        if self.category is Category.CORE and self.scope not in PERSONAL_SCOPES:
            raise ValueError("scope: core memories must be private or personal")
        return self


class RememberBulkInput(InputModel):
    memories: Annotated[
        list[BulkMemory],
        Field(min_length=1, max_length=MAX_BULK_REMEMBER, description="1 to 100 memories to store."),
    ]


class ForgetBulkInput(InputModel):
    memory_ids: Annotated[
        list[Annotated[str, StringConstraints(pattern=MEMORY_ID_PATTERN)]],
        Field(min_length=1, max_length=MAX_BULK_FORGET, description="1 to 500 memory ids."),
    ]
    force: Annotated[bool, Field(description="Required to forget core memories.")] = False


class HealthInput(InputModel):
    pass


BUILD_LAYERS = ("core", "work", "own", "inherited", "team")


class BuildContextInput(InputModel):
    budget_tokens: int = Field(
        default=4000, ge=64, le=200_000, description="Tokens the built context may take (64-200,000)."
    )
    work_id: str | None = Field(
        default=None,
        pattern=MEMORY_ID_PATTERN,
        description="A work item (32 hex): its context tree (attempts, notes, failures) is a layer.",
    )
    shares: dict[Literal["core", "work", "own", "inherited", "team"], float] | None = Field(
        default=None,
        description="Share of the budget per layer (fractions adding up to 1); default core 0.15, "
        "work 0.35, own 0.20, inherited 0.15, team 0.15.",
    )

    tiers: list[Literal["hot", "warm", "cold"]] | None = Field(
        default=None,
        min_length=1,
        description="Only memories of these tiers (default all: hot first, then warm, then cold, in each "
        "layer). The work tree is not tiered.",
    )
    shape: Literal["text", "chat"] = Field(
        default="text",
        description="text: one line per item; chat: also a system prompt (the memories) and messages (the "
        "work so far), as chat hosts take them.",
    )

    @field_validator("shares")
    @classmethod
    def _shares(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return v
        if any(not 0 <= share <= 1 for share in v.values()):
            raise ValueError("each share must be between 0 and 1")
        if abs(sum(v.values()) - 1) > 0.001:
            raise ValueError("the shares must add up to 1")
        return v


class ReadInput(InputModel):
    memory_id: MemoryId = Field(description="The memory to read (32 hex).")


PackItem = Annotated[str, Field(min_length=1, max_length=500)]


class PackInput(InputModel):
    summary: str = Field(
        min_length=1, max_length=8000, description="Where you are: what the task is and how far it got."
    )
    open_work: list[PackItem] = Field(default=[], max_length=50, description="What is left to do.")
    decisions: list[PackItem] = Field(default=[], max_length=50, description="What you decided, and why.")
    files: list[PackItem] = Field(default=[], max_length=200, description="Files you touched (paths).")
    work_id: str | None = Field(
        default=None,
        pattern=MEMORY_ID_PATTERN,
        description="The work item this state is for: its context tree joins the returned context, and "
        "the next attempt of the item (any agent) can restore from the pack.",
    )
    scope: Literal["private", "team"] | None = Field(
        default=None,
        description="Who may restore it: private (you and your sub-agents) or team (default with a "
        "work_id, so the item's next attempt can; else private).",
    )
    budget_tokens: int = Field(
        default=8000, ge=256, le=200_000, description="Tokens the returned context may take (256-200,000)."
    )
    shape: Literal["text", "chat"] = "text"


class RestoreInput(InputModel):
    work_id: str | None = Field(
        default=None, pattern=MEMORY_ID_PATTERN, description="Restore the newest pack of this work item."
    )
    pack_id: str | None = Field(default=None, pattern=MEMORY_ID_PATTERN, description="Restore this pack.")
    budget_tokens: int = Field(default=8000, ge=256, le=200_000)
    shape: Literal["text", "chat"] = "text"

    @model_validator(mode="after")
    def _one(self) -> RestoreInput:
        if (self.work_id is None) == (self.pack_id is None):
            raise ValueError("work_id: give work_id or pack_id (one of them)")
        return self
