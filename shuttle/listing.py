"""Paged listings: one page by default, every page with ``--all``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loom.transport import WeftClient
from shuttle.views import items_of


def fetch(
    client: WeftClient,
    path: str,
    params: Mapping[str, Any],
    *,
    limit: int,
    cursor: str | None,
    follow: bool,
) -> dict[str, Any]:
    """``{"items": [...], "next_cursor": ...}`` gathered from one or all pages."""
    query = dict(params)
    if cursor:
        query["cursor"] = cursor
    items: list[dict[str, Any]] = []
    next_cursor: str | None = None
    total: Any = None
    for page in client.pages(path, query, limit=limit, follow=follow):
        items.extend(items_of(page))
        if isinstance(page, dict):
            next_cursor = page.get("next_cursor")
            total = page.get("total", total)
    result: dict[str, Any] = {"items": items, "next_cursor": next_cursor}
    if total is not None:
        result["total"] = total
    return result


def more_hint(result: Mapping[str, Any]) -> str | None:
    cursor = result.get("next_cursor")
    return f"[dim]more: --cursor {cursor} (or --all)[/dim]" if cursor else None
