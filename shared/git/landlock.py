"""One landing at a time per target branch (docs/landing.md).

A lander takes the target's lock before it claims anything and keeps it while it builds,
gates and pushes a batch; however many landers and Weft replicas run, only one builds on
a target at a time, so no gate runs twice for the same tip. The lock is one key of the
project's landing bucket, changed only compare-and-set: taken by ``create`` (or, once
its holder stopped renewing it, by an update at the revision that was read), renewed and
released at the holder's own revision. A lander that lost it (it was too slow to renew
and another took it over) learns so at its next renewal and stops; the push is a
compare-and-set of its own on git's side, so even then nothing lands twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import Field

from shared.base import LoomModel
from shared.errors import Conflict
from shared.models import utcnow
from shared.names import ProjectNames, landing_key, validate_agent_id
from shared.nats.jetstream import create_new, delete_unchanged, ensure_kv, get_or_none, update_unchanged

LOCK_TTL_S: Final = 120.0
"""A lock its holder stopped renewing is free after this long (the holder renews every third)."""


class LockLost(Conflict):
    """The landing lock is no longer this lander's: it must stop landing."""

    def __init__(self) -> None:
        super().__init__("the landing lock was taken over by another lander", field="lock")


class LandingLock(LoomModel):
    """Who lands on a target now, and on which items."""

    target: str
    holder: str
    since: datetime
    expires_at: datetime
    items: list[str] = Field(default_factory=list, description="The batch it is landing")
    revision: int = Field(default=0, description="The bucket revision this was read at")

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now


class LandingLocks:
    """The project's landing locks."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self._names = names
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await ensure_kv(self._js, self._names.landing_bucket, description="Loom landing locks")
        return self._kv

    async def current(self, target: str) -> LandingLock | None:
        """The lock as stored (it may have expired), or None."""
        entry = await get_or_none(await self._bucket(), landing_key(target))
        if entry is None or entry.value is None:
            return None
        lock = LandingLock.model_validate_json(entry.value)
        return lock.model_copy(update={"revision": int(entry.revision or 0)})

    async def acquire(self, target: str, holder: str, *, ttl_s: float = LOCK_TTL_S) -> LandingLock | None:
        """The lock for ``holder``, or None while another holder's lock is live."""
        validate_agent_id(holder, "holder")
        kv = await self._bucket()
        now = utcnow()
        lock = LandingLock(target=target, holder=holder, since=now, expires_at=now + timedelta(seconds=ttl_s))
        body = lock.model_dump_json(exclude={"revision"}).encode()
        current = await self.current(target)
        if current is None:
            revision = await create_new(kv, landing_key(target), body)
        elif current.holder == holder or current.expired(now):
            revision = await update_unchanged(kv, landing_key(target), body, current.revision)
        else:
            return None
        return None if revision is None else lock.model_copy(update={"revision": revision})

    async def renew(
        self, lock: LandingLock, *, items: list[str] | None = None, ttl_s: float = LOCK_TTL_S
    ) -> LandingLock:
        """A new expiry (and the batch, when given); :class:`LockLost` if it changed hands."""
        now = utcnow()
        update: dict[str, object] = {"expires_at": now + timedelta(seconds=ttl_s)}
        if items is not None:
            update["items"] = items
        renewed = lock.model_copy(update=update)
        body = renewed.model_dump_json(exclude={"revision"}).encode()
        revision = await update_unchanged(await self._bucket(), landing_key(lock.target), body, lock.revision)
        if revision is None:
            raise LockLost()
        return renewed.model_copy(update={"revision": revision})

    async def release(self, lock: LandingLock) -> bool:
        """Free the lock if it is still this one; False when it had changed hands."""
        return await delete_unchanged(await self._bucket(), landing_key(lock.target), lock.revision)
