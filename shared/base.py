"""The one pydantic base of Loom's records: unknown fields refused, assignments checked,
one JSON encoding. A module of its own, below :mod:`shared.models`, so the records that
``shared.models`` builds on (:mod:`shared.usage.rules`) share it without importing back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class LoomModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def to_json_bytes(self) -> bytes:
        return self.model_dump_json().encode()
