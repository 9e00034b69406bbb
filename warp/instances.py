"""Instance ids: two live Warp processes in one folder never share an agent id.

The agent id is derived from (hostname, project path), so a second Warp
started in the same folder would otherwise read the first one's inbox and
overwrite its registry entry. Each process therefore takes a lock in the
project's ``instances`` KV bucket, keyed by the agent id it wants: instance 0
(the plain id) first, then 1, 2, ... (:meth:`shared.identity.Identity.with_instance`).

The lock is refreshed while the process lives and expires with the bucket's
TTL when it does not; a lock left by a process on this host that no longer
exists (``kill -9``) is taken over at once, so a crashed agent that restarts
gets its own id, inbox and registry entry back. ``LOOM_INSTANCE`` pins an
instance explicitly.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from shared.agents.local import pid_alive
from shared.errors import Conflict
from shared.identity import Identity
from shared.models import utcnow
from shared.names import ProjectNames
from shared.nats.jetstream import create_new, ensure_kv, update_unchanged

log = logging.getLogger("loom.warp.instances")

LOCK_TTL_S = 30.0
REFRESH_S = LOCK_TTL_S / 3
MAX_INSTANCES = 64
PROCESS_NONCE = uuid.uuid4().hex
"""Identifies this process's locks, so a retried start-up finds its own lock again. A child
forked from this process (a Warp zygote's) draws its own: two Warps never share it."""


def _renew_nonce() -> None:
    global PROCESS_NONCE
    PROCESS_NONCE = uuid.uuid4().hex


os.register_at_fork(after_in_child=_renew_nonce)


class InstanceError(Conflict):
    """No instance id is free: too many live Warp processes in one folder."""


@dataclass(frozen=True)
class Holder:
    hostname: str
    pid: int
    nonce: str

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"hostname": self.hostname, "pid": self.pid, "nonce": self.nonce, "at": utcnow().isoformat()}
        ).encode()

    @staticmethod
    def parse(raw: bytes | None) -> Holder | None:
        try:
            data = json.loads(raw or b"")
            return Holder(hostname=str(data["hostname"]), pid=int(data["pid"]), nonce=str(data["nonce"]))
        except (ValueError, KeyError, TypeError):
            return None


class InstanceLock:
    def __init__(
        self,
        js: JetStreamContext,
        names: ProjectNames,
        *,
        hostname: str,
        pid: int | None = None,
        nonce: str | None = None,
    ) -> None:
        self._js = js
        self.names = names
        self.me = Holder(
            hostname=hostname, pid=pid if pid is not None else os.getpid(), nonce=nonce or PROCESS_NONCE
        )
        self.key: str | None = None
        self._revision = 0
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await ensure_kv(
                self._js,
                self.names.instance_locks_bucket,
                ttl=LOCK_TTL_S,
                description="Loom Warp instance locks",
            )
        return self._kv

    def forget(self) -> None:
        self._kv = None

    async def _try(self, key: str) -> bool:
        """Take ``key`` if it is free or held by a dead process on this host."""
        kv = await self._bucket()
        created = await create_new(kv, key, self.me.to_bytes())
        if created is not None:
            self._revision = created
            return True
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            return False  # freed between the two calls; the caller tries the next one
        holder = Holder.parse(entry.value)
        if holder is not None and holder.nonce == self.me.nonce:
            self._revision = int(entry.revision or 0)
            return True
        stale = holder is None or (
            holder.hostname == self.me.hostname and holder.pid != self.me.pid and not pid_alive(holder.pid)
        )
        if not stale:
            return False
        taken = await update_unchanged(kv, key, self.me.to_bytes(), int(entry.revision or 0))
        if taken is None:
            return False
        self._revision = taken
        log.info("took over the instance lock of exited process %s", holder.pid if holder else "?")
        return True

    async def acquire(self, identity: Identity, explicit: int | None = None) -> Identity:
        """The identity this process may use: the first free instance (or ``explicit``)."""
        if explicit is not None:
            chosen = identity.with_instance(explicit)
            if not await self._try(chosen.agent_id):
                log.warning("LOOM_INSTANCE=%s is in use by another live Warp; using it anyway", explicit)
            self.key = chosen.agent_id
            return chosen
        for n in range(MAX_INSTANCES):
            candidate = identity.with_instance(n)
            if await self._try(candidate.agent_id):
                self.key = candidate.agent_id
                if n:
                    log.info("instance 0..%d in use in this folder; this Warp is instance %d", n - 1, n)
                return candidate
        raise InstanceError(f"more than {MAX_INSTANCES} live Warp processes in this folder")

    async def refresh(self) -> None:
        """Keep the lock alive (called every :data:`REFRESH_S`)."""
        if self.key is None:
            return
        kv = await self._bucket()
        refreshed = await update_unchanged(kv, self.key, self.me.to_bytes(), self._revision)
        if refreshed is not None:
            self._revision = refreshed
            return
        # Expired (NATS was away longer than the TTL) or taken: take it back if it is free.
        if not await self._try(self.key):
            log.warning("instance lock %s is now held by another process", self.key)

    async def release(self) -> None:
        if self.key is None:
            return
        kv = await self._bucket()
        try:
            entry = await kv.get(self.key)
        except KeyNotFoundError:
            return
        holder = Holder.parse(entry.value)
        if holder is not None and holder.nonce == self.me.nonce:
            await kv.delete(self.key)
        self.key = None
