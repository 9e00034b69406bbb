"""Opaque cursors for paged listings (REST, MCP tools)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from shared.errors import Invalid

T = TypeVar("T")


class CursorError(Invalid, ValueError):
    code = "invalid_cursor"

    def __init__(self, field_name: str = "cursor") -> None:
        super().__init__(
            "not a cursor issued by this listing (pass back next_cursor unchanged)", field=field_name
        )


def encode_cursor(state: dict[str, Any]) -> str:
    raw = json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, field_name: str = "cursor") -> dict[str, Any] | None:
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        state = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError):
        raise CursorError(field_name) from None
    if not isinstance(state, dict):
        raise CursorError(field_name)
    return state


@dataclass
class Page(Generic[T]):
    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None
    total: int | None = None
