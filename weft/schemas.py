"""Response shapes shared by several resources."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field

from shared.errors import NotFound
from shared.refs import MAX_REF_LENGTH, MIN_PREFIX, RefIndex
from weft.errors import ErrorBody

if TYPE_CHECKING:
    from shared.nats.mirror import BucketMirror

T = TypeVar("T")


class PageOut(BaseModel, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None = Field(default=None, description="Opaque; null on the last page")
    total: int | None = Field(default=None, description="Matching items across all pages")


class BatchResult(BaseModel):
    id: str
    ok: bool
    status: str | None = None
    error: ErrorBody | None = None


class BatchOut(BaseModel):
    results: list[BatchResult]
    succeeded: int
    failed: int

    @classmethod
    def of(cls, results: list[BatchResult]) -> BatchOut:
        ok = sum(1 for r in results if r.ok)
        return cls(results=results, succeeded=ok, failed=len(results) - ok)


class ResolvedOut(BaseModel):
    """What ``GET .../resolve?ref=`` found (``shared.refs``): the one record a full id, a name
    or an id prefix names."""

    id: str
    matched: Literal["id", "name", "prefix"] = Field(description="How the reference matched")

    @classmethod
    async def from_copy(
        cls, ref: str, mirror: BucketMirror[Any], index: Callable[[], RefIndex], what: str
    ) -> ResolvedOut:
        """Resolved against Weft's copy as it is (waiting for the copy to catch up costs more
        than the answer while writes go on); a reference that names nothing is tried again once
        the copy has every write (an item submitted a moment ago)."""
        try:
            found = index().resolve(ref, field="ref", what=what)
        except NotFound:
            await mirror.sync()
            found = index().resolve(ref, field="ref", what=what)
        return cls(id=found.id, matched=found.matched)


RefQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=MAX_REF_LENGTH,
        description=f"A full id, a name, or at least {MIN_PREFIX} leading characters of an id",
    ),
]
