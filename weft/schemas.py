"""Response shapes shared by several resources."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

from weft.errors import ErrorBody

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
