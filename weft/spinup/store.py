"""Spin-up operations and per-target admission state in the project's spinups bucket.

Three kinds of keys:

* ``op.<spinup-id>``: the :class:`SpinupRecord` (the public
  :class:`~shared.models.SpinupOperation` plus bookkeeping);
* ``slot.<target-id>``: the :class:`TargetSlot` that admission control reads
  and writes with compare-and-set: the one in-flight start, the live
  operations and the time of the last start. Because the slot is the only
  place a start is admitted, two Weft replicas racing for the same target
  cannot both start (the loser's write fails and it re-reads);
* ``work.<work-id>``: the :class:`WorkReservation` of the start made for a waiting work
  item, so sweeps that find it still waiting do not start a second agent for it.

A running Weft follows the bucket through one :class:`~shared.nats.mirror.BucketMirror`
(:meth:`SpinupStore.start`); decisions still read and write the keys themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import Field

from shared.base import LoomModel
from shared.errors import Conflict, NotFound
from shared.models import SpinupOperation, SpinupState, Target, utcnow
from shared.names import ProjectNames
from shared.nats.cas import cas_update, cas_upsert
from shared.nats.jetstream import (
    ensure_kv,
    get_or_none,
    snapshot_keys,
)
from shared.nats.mirror import BucketMirror

IN_FLIGHT_STATES = frozenset({SpinupState.PENDING, SpinupState.STARTING, SpinupState.RUNNING})
"""Started but not yet registered: at most one per target."""
FINAL_STATES = frozenset({SpinupState.STOPPED, SpinupState.FAILED, SpinupState.TIMED_OUT})
LIVE_STATES = frozenset(set(SpinupState) - FINAL_STATES)
"""Counted against the target's ``max_concurrent``."""


class SpinupNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("no spin-up operation with this id in this project", field="spinup_id")


class SpinupRecord(LoomModel):
    op: SpinupOperation
    mechanism: str = "local"
    config: dict[str, Any] = Field(default_factory=dict)
    """Snapshot of the target's mechanism and config at start, so the agent can be
    stopped the way it was started even after the target changed or was removed."""
    register_deadline: datetime | None = None
    register_timeout_s: float | None = None
    shutdown_requested_at: datetime | None = None
    shutdown_reason: str | None = None
    stop_started_at: datetime | None = None
    """When a replica began stopping the agent through its mechanism."""
    stop_done_at: datetime | None = None
    stop_note: str | None = None
    started_by: str = ""
    """The Weft replica (host) that ran the mechanism's start."""
    nats_user_key: str | None = None
    """Scoped NATS auth: the public key of the agent's credentials (revoked when it ends)."""
    nats_expires_at: datetime | None = None


class TargetSlot(LoomModel):
    target_id: str
    in_flight: str | None = None
    live: list[str] = Field(default_factory=list)
    last_start_at: datetime | None = None


RESERVATION_GRACE_S = 30.0
"""How long a reservation whose start has no record yet is honoured. The start is recorded
a moment after it is reserved (on a loaded machine, seconds); a reservation older than this
without a record was left by a Weft that stopped between the two writes."""


class WorkReservation(LoomModel):
    spinup_id: str
    at: datetime = Field(default_factory=utcnow)


def _reservation(raw: bytes) -> WorkReservation:
    try:
        return WorkReservation.model_validate_json(raw)
    except ValueError:  # written by an earlier Weft: the bare id, its time unknown
        return WorkReservation(spinup_id=raw.decode(), at=datetime.min.replace(tzinfo=UTC))


class _Outraced(Conflict):
    """Every compare-and-set of an admission lost its race: the caller answers with a
    :class:`Refusal` or a placeholder id instead (it never leaves this module)."""


@dataclass(frozen=True)
class Refusal:
    """Why a target cannot start another agent right now."""

    code: str
    """``in-flight``, ``max-concurrent``, ``cooldown``, ``budget`` (a daily budget reached) or
    ``pause`` (an operator paused the project)."""
    message: str
    retry_after_s: float | None = None


def _parse(key: str, raw: bytes) -> SpinupRecord | TargetSlot | WorkReservation:
    if key.startswith("op."):
        return SpinupRecord.model_validate_json(raw)
    if key.startswith("slot."):
        return TargetSlot.model_validate_json(raw)
    return _reservation(raw)


def newest_first(records: list[SpinupRecord]) -> list[SpinupOperation]:
    return sorted((r.op for r in records), key=lambda op: op.created_at, reverse=True)


def _op_key(spinup_id: str) -> str:
    return f"op.{spinup_id}"


def _slot_key(target_id: str) -> str:
    return f"slot.{target_id}"


def _work_key(work_id: str) -> str:
    return f"work.{work_id}"


def admission(target: Target, slot: TargetSlot, now: datetime) -> Refusal | None:
    """The one rule: one in-flight start, ``max_concurrent`` live, ``cooldown_s`` between starts."""
    if slot.in_flight is not None:
        return Refusal("in-flight", f"target {target.name} is already starting an agent ({slot.in_flight})")
    if len(slot.live) >= target.max_concurrent:
        return Refusal(
            "max-concurrent",
            f"target {target.name} already runs {len(slot.live)} of max_concurrent "
            f"{target.max_concurrent} agents",
        )
    if slot.last_start_at is not None and target.cooldown_s > 0:
        ready = slot.last_start_at + timedelta(seconds=target.cooldown_s)
        if ready > now:
            wait = (ready - now).total_seconds()
            return Refusal("cooldown", f"target {target.name} is cooling down for {wait:.1f}s more", wait)
    return None


class SpinupStore:
    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self.names = names
        self._kv: KeyValue | None = None
        self._mirror: BucketMirror[SpinupRecord | TargetSlot | WorkReservation] | None = None

    async def start(self, nc: NatsClient | None = None) -> None:
        """Serve :meth:`slots`, :meth:`all` and reservation checks from a live copy of the bucket."""
        if self._mirror is None:
            await self.bucket()
            self._mirror = BucketMirror(self._js, self.names.spinups_bucket, _parse, nc=nc)
        await self._mirror.start()

    async def stop(self) -> None:
        if self._mirror is not None:
            await self._mirror.stop()

    async def sync(self) -> None:
        """Read-your-writes for the live copy (nothing to wait for without one)."""
        if self._copy is not None:
            await self._copy.sync()

    @property
    def _copy(self) -> BucketMirror[SpinupRecord | TargetSlot | WorkReservation] | None:
        return self._mirror if self._mirror is not None and self._mirror.running else None

    async def bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await ensure_kv(self._js, self.names.spinups_bucket, description="Loom spin-ups")
        return self._kv

    # -- admission ---------------------------------------------------------------
    async def _slot(self, target_id: str) -> tuple[TargetSlot, int | None]:
        entry = await get_or_none(await self.bucket(), _slot_key(target_id))
        if entry is None or entry.value is None:
            return TargetSlot(target_id=target_id), None
        return TargetSlot.model_validate_json(entry.value), int(entry.revision or 0)

    async def slot(self, target_id: str) -> TargetSlot:
        return (await self._slot(target_id))[0]

    async def admit(self, target: Target, record: SpinupRecord) -> Refusal | None:
        """Reserve the target for ``record`` (and store it) or say why not; atomic per target."""
        kv = await self.bucket()
        stored = False
        refusal: Refusal | None = None

        async def reserve(found: TargetSlot | None) -> TargetSlot | None:
            nonlocal stored, refusal
            slot = TargetSlot(target_id=target.id) if found is None else found
            now = utcnow()
            refusal = admission(target, slot, now)
            if refusal is not None:
                return None
            if not stored:
                await kv.create(_op_key(record.op.id), record.to_json_bytes())
                stored = True
            slot.in_flight = record.op.id
            slot.live.append(record.op.id)
            slot.last_start_at = now
            return slot

        try:
            try:
                swap = await cas_upsert(
                    kv,
                    _slot_key(target.id),
                    reserve,
                    parse=TargetSlot.model_validate_json,
                    dump=TargetSlot.to_json_bytes,
                    conflict=lambda: _Outraced("being changed concurrently", field="target_id"),
                )
            except _Outraced:
                return Refusal("in-flight", f"target {target.name} is being started concurrently; try again")
            if swap.changed:
                stored = False  # admitted: keep the record
            return refusal
        finally:
            if stored:
                await kv.purge(_op_key(record.op.id))

    async def release(self, target_id: str, spinup_id: str, *, keep_live: bool) -> TargetSlot:
        """Clear the in-flight mark of ``spinup_id``; also drop it from ``live`` unless ``keep_live``."""

        def drop(found: TargetSlot | None) -> TargetSlot | None:
            slot = TargetSlot(target_id=target_id) if found is None else found
            changed = False
            if slot.in_flight == spinup_id:
                slot.in_flight = None
                changed = True
            if not keep_live and spinup_id in slot.live:
                slot.live.remove(spinup_id)
                changed = True
            return slot if changed else None

        swap = await cas_upsert(
            await self.bucket(),
            _slot_key(target_id),
            drop,
            parse=TargetSlot.model_validate_json,
            dump=TargetSlot.to_json_bytes,
            conflict=lambda: Conflict(
                "the slot of this target is being changed concurrently; try again", field="target_id"
            ),
        )
        return TargetSlot(target_id=target_id) if swap.after is None else swap.after

    # -- one start per waiting work item -------------------------------------------------
    async def reserve_work(self, work_id: str, spinup_id: str) -> str | None:
        """Mark ``spinup_id`` as the start made for ``work_id``; returns the id of another
        start already in flight for it (then nothing is reserved), else None.

        Without this, every sweep that finds the item still waiting while its agent is
        starting would admit a start on the next matching target too."""
        if self._copy is not None:
            for record in self._copy.values("op."):
                if not isinstance(record, SpinupRecord):
                    continue
                op = record.op
                if op.work_id == work_id and op.state in IN_FLIGHT_STATES and op.id != spinup_id:
                    return op.id
        other: str | None = None

        async def reserve(holder: WorkReservation | None) -> WorkReservation | None:
            nonlocal other
            other = None
            if holder is None:
                return WorkReservation(spinup_id=spinup_id)
            if holder.spinup_id == spinup_id:
                return None
            try:
                if (await self.get(holder.spinup_id)).op.state in IN_FLIGHT_STATES:
                    other = holder.spinup_id
                    return None
            except SpinupNotFound:  # reserved, and its start not recorded yet: honoured a while
                if (utcnow() - holder.at).total_seconds() < RESERVATION_GRACE_S:
                    other = holder.spinup_id
                    return None
            return WorkReservation(spinup_id=spinup_id)

        try:
            await cas_upsert(
                await self.bucket(),
                _work_key(work_id),
                reserve,
                parse=_reservation,
                dump=WorkReservation.to_json_bytes,
                conflict=lambda: _Outraced("being changed concurrently", field="work_id"),
            )
        except _Outraced:
            return "(concurrent)"
        return other

    async def release_work(self, work_id: str | None, spinup_id: str) -> None:
        """Forget the reservation of ``work_id`` if ``spinup_id`` still holds it."""
        if not work_id:
            return
        kv = await self.bucket()
        entry = await get_or_none(kv, _work_key(work_id))
        if entry is not None and entry.value and _reservation(entry.value).spinup_id == spinup_id:
            try:
                await kv.purge(_work_key(work_id))
            except Exception:  # a racing writer took it over meanwhile: theirs now
                return

    def known_slots(self) -> list[TargetSlot]:
        """The slots as the live copy has them (none without one): no round trip."""
        if self._copy is None:
            return []
        return [slot for slot in self._copy.values("slot.") if isinstance(slot, TargetSlot)]

    async def slots(self) -> list[TargetSlot]:
        if self._copy is not None:
            return self.known_slots()
        return [TargetSlot.model_validate_json(v) for v in await self._values("slot.*")]

    # -- operations ----------------------------------------------------------------
    async def get(self, spinup_id: str) -> SpinupRecord:
        entry = await get_or_none(await self.bucket(), _op_key(spinup_id))
        if entry is None or entry.value is None:
            raise SpinupNotFound()
        return SpinupRecord.model_validate_json(entry.value)

    async def mutate(
        self, spinup_id: str, change: Callable[[SpinupRecord], SpinupRecord | None]
    ) -> tuple[SpinupRecord, SpinupRecord]:
        """Compare-and-set ``change`` onto the record; returns (before, after).
        ``change`` returns None to leave the record as it is."""

        def changed(before: SpinupRecord) -> SpinupRecord | None:
            after = change(before.model_copy(deep=True))
            if after is not None:
                after.op.updated_at = utcnow()
            return after

        swap = await cas_update(
            await self.bucket(),
            _op_key(spinup_id),
            changed,
            parse=SpinupRecord.model_validate_json,
            dump=SpinupRecord.to_json_bytes,
            absent=SpinupNotFound,
            conflict=lambda: Conflict(
                "this spin-up operation is being changed concurrently; try again", field="spinup_id"
            ),
        )
        assert swap.after is not None
        return swap.before, swap.after

    async def all(self) -> list[SpinupRecord]:
        if self._copy is not None:
            return [record for record in self._copy.values("op.") if isinstance(record, SpinupRecord)]
        return [SpinupRecord.model_validate_json(v) for v in await self._values("op.*")]

    async def remove(self, spinup_id: str) -> None:
        await (await self.bucket()).purge(_op_key(spinup_id))

    async def _values(self, keys: str) -> list[bytes]:
        kv = await self.bucket()
        return list((await snapshot_keys(self._js, kv, self.names.spinups_bucket, keys)).values())
