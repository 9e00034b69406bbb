"""The one pydantic base of Loom's records: unknown fields refused, assignments checked,
one JSON encoding. A module of its own, below :mod:`shared.models`, so the records that
``shared.models`` builds on (:mod:`shared.usage.rules`) share it without importing back."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, WithJsonSchema

JSON_TYPES = ("object", "array", "string", "number", "boolean", "null")

AnyJson = Annotated[
    Any,
    WithJsonSchema({"anyOf": [{"type": kind} for kind in JSON_TYPES], "description": "Any JSON value"}),
]
"""A field that holds whatever JSON its writer gave (a work result, resolved content), with a
schema that says so: an untyped ``{}`` is what strict MCP clients warn about, and a ``type``
list is what they warn about next (clients that map schemas onto one ``type`` per schema, as
for Gemini's function declarations, cannot take it), so each type is a branch of its own."""


class LoomModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def to_json_bytes(self) -> bytes:
        return self.model_dump_json().encode()
