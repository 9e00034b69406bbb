"""How the spin-up package reads targets and reports on them.

Targets are owned by Weft's target store (``weft/targets/store.py``); the
spin-up package needs only a narrow view of it, so it depends on this
protocol and the store (or :class:`KvTargets`, a minimal reader of the same
bucket) provides it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from shared.events import publish_event
from shared.jsutil import CAS_RETRIES, cas_backoff, ensure_kv, snapshot_keys
from shared.models import Target, TargetHealth, utcnow
from shared.names import ProjectNames
from weft.spinup.kvmirror import KvMirror


class TargetMissing(LookupError):
    def __init__(self, target_id: str) -> None:
        self.target_id = target_id
        super().__init__(f"target: no target {target_id!r} in this project")


class TargetSource(Protocol):
    async def list_targets(self) -> list[Target]: ...

    async def get_target(self, target_id: str) -> Target: ...

    async def record_health(
        self, target_id: str, health: TargetHealth, detail: str | None, at: datetime
    ) -> Target:
        """Write the verdict to the target and publish ``target.health-checked``."""
        ...

    async def record_spinup(self, target_id: str, at: datetime) -> None: ...


def _key(target_id: str) -> str:
    return f"t.{target_id}"


class KvTargets:
    """Targets in the project's targets bucket, in the layout Weft's target store uses
    (``t.<id>`` holds the :class:`~shared.models.Target`, ``n.<name>`` the id owning the name),
    for the engine running outside Weft (a separate spin-up process, tests, benchmarks)."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self.names = names
        self._kv: KeyValue | None = None
        self._mirror: KvMirror[Target] | None = None

    async def start_mirror(self) -> None:
        if self._mirror is None:
            self._mirror = KvMirror(
                self._js,
                await self.bucket(),
                self.names.targets_bucket,
                Target.model_validate_json,
                keys="t.*",
            )
        await self._mirror.start()

    async def stop_mirror(self) -> None:
        if self._mirror is not None:
            await self._mirror.stop()

    async def bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await ensure_kv(self._js, self.names.targets_bucket, description="Loom targets")
        return self._kv

    async def put(self, target: Target) -> Target:
        """Write a target as is (no name-uniqueness check: that is the target store's job)."""
        kv = await self.bucket()
        await kv.put(f"n.{target.name}", target.id.encode())
        revision = await kv.put(_key(target.id), target.to_json_bytes())
        await self._seen(int(revision))
        return target

    async def _seen(self, revision: int) -> None:
        if self._mirror is not None and self._mirror.running:
            await self._mirror.wait_for(revision)

    async def list_targets(self) -> list[Target]:
        if self._mirror is not None and self._mirror.running:
            return self._mirror.values()
        kv = await self.bucket()
        values = await snapshot_keys(self._js, kv, self.names.targets_bucket, "t.*")
        return [Target.model_validate_json(raw) for raw in values.values()]

    async def get_target(self, target_id: str) -> Target:
        kv = await self.bucket()
        try:
            entry = await kv.get(_key(target_id))
        except KeyNotFoundError:
            raise TargetMissing(target_id) from None
        except Exception as exc:  # not a valid key at all
            if "key" in str(exc).lower():
                raise TargetMissing(target_id) from None
            raise
        if not entry.value:
            raise TargetMissing(target_id)
        return Target.model_validate_json(entry.value)

    async def _update(self, target_id: str, **changes: object) -> Target:
        kv = await self.bucket()
        for attempt in range(CAS_RETRIES):
            try:
                entry = await kv.get(_key(target_id))
            except KeyNotFoundError:
                raise TargetMissing(target_id) from None
            if not entry.value:
                raise TargetMissing(target_id)
            target = Target.model_validate_json(entry.value).model_copy(update=changes)
            target.updated_at = utcnow()
            try:
                revision = await kv.update(_key(target_id), target.to_json_bytes(), last=entry.revision)
            except KeyWrongLastSequenceError:
                await cas_backoff(attempt)
                continue
            await self._seen(int(revision))
            return target
        raise RuntimeError(f"target_id: could not update {target_id} under contention")

    async def record_health(
        self, target_id: str, health: TargetHealth, detail: str | None, at: datetime
    ) -> Target:
        target = await self._update(target_id, health=health, health_detail=detail, last_health_check=at)
        data = {"target_name": target.name, "health": health.value, "detail": detail}
        await publish_event(self._js, self.names, "target", "health-checked", target_id, data)
        return target

    async def record_spinup(self, target_id: str, at: datetime) -> None:
        await self._update(target_id, last_spinup_at=at)
