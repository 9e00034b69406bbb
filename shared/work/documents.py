"""One settings document per project in its config bucket, changed compare-and-set.

A project's repository (docs/workstreams.md) and its autonomy policy (docs/operator.md)
are each one key of the project's config bucket: an operator replaces the whole document
(Weft, admin scope), optionally only if nobody changed it since they read it, and every
agent's Warp reads it where it needs it. The stored document is the settings plus who
changed them last and when; ``revision`` is the bucket revision it was read at.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import Field

from shared.base import LoomModel
from shared.errors import Conflict
from shared.models import utcnow
from shared.names import ProjectNames
from shared.nats.cas import cas_upsert
from shared.nats.jetstream import delete_unchanged, get_or_none
from shared.work.policy import config_bucket


class StoredDocument(LoomModel):
    """What every stored settings document carries besides its settings (listed
    before the settings class among a document's bases, so these fields come last)."""

    updated_at: datetime = Field(default_factory=utcnow)
    updated_by: str = "operator"
    revision: int = Field(default=0, description="The bucket revision this was read at")


Settings = TypeVar("Settings", bound=LoomModel)
Doc = TypeVar("Doc", bound=StoredDocument)


class DocumentStore(Generic[Settings, Doc]):
    """``key`` of the project's config bucket, holding a ``doc_type``."""

    def __init__(
        self,
        js: JetStreamContext,
        names: ProjectNames,
        *,
        key: str,
        doc_type: type[Doc],
        field: str,
        stored: Callable[[Settings, str], Doc],
    ) -> None:
        """``field`` names the document in a conflict's error; ``stored(settings, by)``
        makes the document to store (its ``updated_at`` now)."""
        self._js = js
        self.names = names
        self._key = key
        self._doc_type = doc_type
        self._field = field
        self._stored = stored
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await config_bucket(self._js, self.names)
        return self._kv

    async def get(self) -> Doc | None:
        entry = await get_or_none(await self._bucket(), self._key)
        if entry is None or not entry.value:
            return None
        return self._doc_type.model_validate_json(entry.value).model_copy(update={"revision": entry.revision})

    async def put(self, settings: Settings, *, by: str, expected_revision: int | None = None) -> Doc:
        """Replace the document, compare-and-set; with ``expected_revision`` (the revision
        the caller read, 0 for none) only if nobody changed it since."""

        def replace(current: Doc | None) -> Doc:
            found = current.revision if current is not None else 0
            if expected_revision is not None and found != expected_revision:
                raise Conflict(
                    f"the {self._field} changed since you read it; read it again",
                    field="revision",
                    rule="unchanged",
                )
            return self._stored(settings, by)

        swap = await cas_upsert(
            await self._bucket(),
            self._key,
            replace,
            parse=self._doc_type.model_validate_json,
            dump=lambda d: d.model_dump_json(exclude={"revision"}).encode(),
            conflict=lambda: Conflict("being changed concurrently; try again", field=self._field),
            read=self._read,
        )
        assert swap.after is not None
        return swap.after.model_copy(update={"revision": swap.revision})

    async def _read(self) -> tuple[Doc, int] | None:
        found = await self.get()
        return (found, found.revision) if found is not None else None

    async def delete(self, *, expected_revision: int | None = None) -> bool:
        """Forget the document; False when none was set. Only the revision read is deleted."""
        found = await self.get()
        if found is None:
            return False
        if expected_revision is not None and found.revision != expected_revision:
            raise Conflict(f"the {self._field} changed since you read it", field="revision", rule="unchanged")
        if not await delete_unchanged(await self._bucket(), self._key, found.revision):
            raise Conflict("being changed concurrently; try again", field=self._field)
        return True
