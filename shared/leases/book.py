"""File leases: an agent says which paths it is changing, and nobody else may take them
(docs/leases.md).

Each lease is one record in the project's leases bucket (key: lease id). What a lease
covers and when two overlap is in :mod:`shared.leases.patterns`; when a lease stands in
another's way, when it has ended and what each operation does to a record are pure
rules here (``conflicts``, ``ended_by``, ``renew_rule``). :class:`LeaseBook` keeps a
copy of the bucket (one :class:`~shared.nats.mirror.BucketMirror`, with a
:class:`~shared.leases.patterns.PatternIndex` over it) and stores each change
compare-and-set:

* **acquire** writes the new lease only if the bucket's last sequence is still the one
  the copy was checked at (``Nats-Expected-Last-Sequence``): had any lease been taken,
  renewed or released meanwhile, the server refuses the write, the copy catches up and
  the check runs again. So two overlapping acquires, from any processes, never both
  win. The sequence the grant is stored at is its fencing token.
* **renew** and **release** are compare-and-set on the lease's own revision.

Leases end by themselves: past their expiry (nobody's check counts them any more, and
a sweep deletes them), when their holder no longer holds the work item they serve, and
when the holder goes offline (:meth:`LeaseBook.sweep`, run by Weft on every change of
the work and agent registries it follows, and periodically).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import Conflict, Forbidden, LoomError, NotFound
from shared.events import ensure_events_stream, publish_event
from shared.leases.patterns import PatternIndex, normalise_all
from shared.models import MAX_LEASE_REASON, Lease, LeaseMode, WorkItem, WorkStatus, utcnow
from shared.names import ProjectNames, kv_subject, validate_agent_id, validate_id, validate_work_id
from shared.nats.cas import DELETE, Delete, cas_backoff, cas_update
from shared.nats.jetstream import delete_unchanged, ensure_kv, publish_unchanged
from shared.nats.mirror import BucketMirror, Slot, model_parser
from shared.tasks import Background, raise_if_cancelling

log = logging.getLogger("loom.leases")

MIN_TTL_S: Final = 5.0
MAX_TTL_S: Final = 86_400.0
DEFAULT_TTL_S: Final = 900.0
MAX_WAIT_S: Final = 300.0
MAX_CONFLICTS_SHOWN: Final = 20
CONTENTION_S: Final = 10.0
"""How long an acquire keeps retrying while other processes' lease writes win the race."""

HELD_STATUSES: Final = frozenset(
    {WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS, WorkStatus.WAITING_ON_OPERATOR, WorkStatus.REVIEWING}
)
"""While its item is in one of these (and assigned to the lease's holder), a lease tied to
work lives on; handing it in, finishing, failing, losing the claim or a cancel end it."""


class LeaseError(LoomError):
    """A refused lease operation; ``field`` names the input at fault."""


class LeaseNotFound(LeaseError, NotFound):
    def __init__(self) -> None:
        super().__init__(
            "no such lease in this project (it may have ended: released, expired or its work ended)",
            field="lease_id",
        )


class NotHolder(LeaseError, Forbidden):
    def __init__(self) -> None:
        super().__init__("this lease is held by another agent", field="lease_id")


@dataclass(frozen=True)
class Clash:
    """One lease standing in the way of an acquire."""

    lease: Lease
    theirs: str
    """Their pattern that overlaps."""
    mine: str
    """The requested pattern it overlaps."""
    path: str
    """A path both cover."""

    def describe(self) -> str:
        return (
            f"{self.mine} overlaps {self.theirs} (e.g. {self.path}), leased {self.lease.mode.value} by "
            f"{held_by(self.lease)} until {self.lease.expires_at.isoformat()} [lease {self.lease.id}]"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "lease_id": self.lease.id,
            "holder": self.lease.holder,
            "holder_handle": self.lease.holder_handle,
            "work_id": self.lease.work_id,
            "branch": self.lease.branch,
            "mode": self.lease.mode.value,
            "patterns": list(self.lease.patterns),
            "expires_at": self.lease.expires_at.isoformat(),
            "pattern": self.theirs,
            "requested": self.mine,
            "path": self.path,
        }


def held_by(lease: Lease) -> str:
    """Who holds a lease and for what: ``handle (agent id) for work W on branch B``."""
    work = f" for work {lease.work_id}" if lease.work_id else ""
    if lease.branch:
        work += f" on branch {lease.branch}"
    return f"{lease.holder_handle or lease.holder} ({lease.holder}){work}"


class LeaseConflict(LeaseError, Conflict):
    """Leases of other agents overlap the request; ``clashes`` names each holder."""

    def __init__(self, clashes: Sequence[Clash]) -> None:
        shown = clashes[:MAX_CONFLICTS_SHOWN]
        more = f"; and {len(clashes) - len(shown)} more" if len(clashes) > len(shown) else ""
        super().__init__(
            "held by another agent: " + "; ".join(c.describe() for c in shown) + more, field="patterns"
        )
        self.clashes = list(clashes)


# -- rules ---------------------------------------------------------------------------------------


def check_ttl(ttl_s: float, field: str = "ttl_s") -> float:
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not MIN_TTL_S <= ttl_s <= MAX_TTL_S:
        raise LeaseError(f"must be between {MIN_TTL_S:g} and {MAX_TTL_S:g} seconds", field=field)
    return float(ttl_s)


def check_reason(reason: str) -> str:
    if len(reason) > MAX_LEASE_REASON:
        raise LeaseError(f"must be at most {MAX_LEASE_REASON} characters", field="reason")
    return reason


def check_wait(wait_s: float) -> float:
    if isinstance(wait_s, bool) or not isinstance(wait_s, int | float) or not 0 <= wait_s <= MAX_WAIT_S:
        raise LeaseError(f"must be between 0 and {MAX_WAIT_S:g} seconds", field="wait_s")
    return float(wait_s)


def is_live(lease: Lease, now: datetime) -> bool:
    return lease.expires_at > now


def stands_in_way(theirs: Lease, holder: str, mode: LeaseMode, now: datetime) -> bool:
    """Whether ``theirs`` keeps ``holder`` from a lease in ``mode`` on overlapping paths:
    one's own leases never do, nor an expired one, nor a shared one for a shared request."""
    if theirs.holder == holder or not is_live(theirs, now):
        return False
    return not (theirs.mode is LeaseMode.SHARED and mode is LeaseMode.SHARED)


def ended_by(
    lease: Lease,
    now: datetime,
    *,
    holder_online: Callable[[str], bool] | None = None,
    work_item: Callable[[str], WorkItem | None] | None = None,
) -> str | None:
    """Why ``lease`` has ended (None: it has not): ``expired``, ``holder offline`` or
    ``work ended`` (``work_item`` answers None for an item that is gone)."""
    if not is_live(lease, now):
        return "expired"
    if holder_online is not None and not holder_online(lease.holder):
        return "holder offline"
    if lease.work_id is not None and work_item is not None:
        item = work_item(lease.work_id)
        if item is None or not holds(item, lease.holder):
            return "work ended"
    return None


def holds(item: WorkItem, agent_id: str) -> bool:
    return item.status in HELD_STATUSES and item.assigned_to == agent_id


def grant(
    project_id: str,
    holder: str,
    handle: str,
    patterns: list[str],
    mode: LeaseMode,
    ttl_s: float,
    reason: str,
    work_id: str | None,
    now: datetime,
    branch: str | None = None,
) -> Lease:
    return Lease(
        project_id=project_id,
        holder=holder,
        holder_handle=handle,
        patterns=patterns,
        mode=mode,
        reason=reason,
        work_id=work_id,
        branch=branch,
        ttl_s=ttl_s,
        acquired_at=now,
        renewed_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )


def renew_rule(lease: Lease, revision: int, holder: str, ttl_s: float | None, now: datetime) -> Lease:
    """The holder's renewal: a new expiry from now; refused once the lease has ended."""
    if lease.holder != holder:
        raise NotHolder()
    if not is_live(lease, now):
        raise LeaseError(
            "this lease has expired: acquire it again (another agent may hold the paths now)",
            field="lease_id",
            code="conflict",
        )
    ttl = lease.ttl_s if ttl_s is None else ttl_s
    return lease.model_copy(
        update={
            "ttl_s": ttl,
            "renewed_at": now,
            "expires_at": now + timedelta(seconds=ttl),
            "token": fencing_token(lease, revision),
        }
    )


def fencing_token(lease: Lease, revision: int) -> int:
    """The token of a stored lease: its grant's sequence (the revision of the first version)."""
    return lease.token or revision


@dataclass(frozen=True)
class LeaseFilter:
    holder: str | None = None
    work_id: str | None = None

    def matches(self, lease: Lease) -> bool:
        return (self.holder is None or lease.holder == self.holder) and (
            self.work_id is None or lease.work_id == self.work_id
        )


# -- I/O -------------------------------------------------------------------------------------------


class LeaseBook:
    """All lease operations of one project, over one copy of its leases bucket."""

    def __init__(self, nc: NatsClient, names: ProjectNames, *, js: JetStreamContext | None = None) -> None:
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names
        self._kv: KeyValue | None = None
        self._mirror: BucketMirror[Lease] | None = None
        self._index = PatternIndex()
        self._lock = asyncio.Lock()
        self._changes = 0
        """How many changes the copy has applied (waiters wait for it to move)."""
        self._changed = asyncio.Condition()
        self._background = Background(log)
        self._granting = asyncio.Lock()

    # -- the copy ------------------------------------------------------------------------------
    async def start(self) -> BucketMirror[Lease]:
        """Load the copy of the bucket (created on first use) and follow it."""
        if self._mirror is None:
            async with self._lock:
                if self._mirror is None:
                    await ensure_events_stream(self._js, self.names)
                    self._kv = await ensure_kv(
                        self._js, self.names.leases_bucket, description="Loom file leases"
                    )
                    mirror = BucketMirror(
                        self._js,
                        self.names.leases_bucket,
                        model_parser(Lease),
                        on_change=self._indexed,
                        nc=self._nc,
                    )
                    await mirror.start()
                    self._mirror = mirror
        return self._mirror

    async def stop(self) -> None:
        await self._background.close()
        if self._mirror is not None:
            await self._mirror.stop()
            self._mirror = None

    @property
    def started(self) -> bool:
        return self._mirror is not None

    async def _indexed(
        self, key: str, before: Slot[Lease] | None, after: Slot[Lease] | None, _initial: bool
    ) -> None:
        lease = None if after is None else _parse(after)
        if lease is None:
            self._index.discard(key)
        else:
            self._index.add(key, lease.patterns)
        async with self._changed:
            self._changes += 1
            self._changed.notify_all()

    def _lease(self, key: str) -> tuple[Lease, int] | None:
        mirror = self._mirror
        if mirror is None:
            return None
        lease, revision = mirror.get(key), mirror.revision_of(key)
        if lease is None or revision is None:
            return None
        return lease.model_copy(update={"token": fencing_token(lease, revision)}), revision

    def leases(self) -> list[Lease]:
        """Every stored lease (live or not yet swept), tokens filled in."""
        mirror = self._mirror
        if mirror is None:
            return []
        found = (self._lease(key) for key, _ in mirror.items())
        return [pair[0] for pair in found if pair is not None]

    # -- checks ----------------------------------------------------------------------------------
    def clashes(self, holder: str, patterns: Iterable[str], mode: LeaseMode, now: datetime) -> list[Clash]:
        """Leases of others in the way of ``holder`` taking ``patterns`` in ``mode``."""
        found: list[Clash] = []
        seen: set[tuple[str, str]] = set()
        for owner, theirs, mine, path in self._index.overlapping(patterns):
            stored = self._lease(owner)
            if stored is None or (owner, mine) in seen:
                continue
            lease = stored[0]
            if stands_in_way(lease, holder, mode, now):
                seen.add((owner, mine))
                found.append(Clash(lease, theirs, mine, path))
        return found

    async def conflicting(
        self,
        patterns: Sequence[str],
        *,
        holder: str | None = None,
        mode: LeaseMode = LeaseMode.EXCLUSIVE,
        root: str | None = None,
    ) -> list[Clash]:
        """Live leases (of others than ``holder``) that a lease on ``patterns`` would clash with."""
        wanted = normalise_all(list(patterns), "paths", root=root)
        mirror = await self.start()
        await mirror.sync()
        return self.clashes(holder or "", wanted, mode, utcnow())

    # -- operations ------------------------------------------------------------------------------
    async def acquire(
        self,
        holder: str,
        patterns: Sequence[str],
        *,
        mode: LeaseMode = LeaseMode.EXCLUSIVE,
        ttl_s: float = DEFAULT_TTL_S,
        reason: str = "",
        work_id: str | None = None,
        handle: str = "",
        wait_s: float = 0.0,
        root: str | None = None,
        holds_work: Callable[[str], Any] | None = None,
        branch: str | None = None,
    ) -> Lease:
        """Grant ``holder`` a lease on ``patterns``, or :class:`LeaseConflict` naming who
        holds what stands in the way (after waiting up to ``wait_s`` for it to end).
        ``holds_work`` (awaitable, given the work id) refuses a lease for work the holder
        does not hold."""
        validate_agent_id(holder, "holder")
        wanted = normalise_all(list(patterns), "patterns", root=root)
        ttl = check_ttl(ttl_s)
        check_reason(reason)
        wait = check_wait(wait_s)
        if work_id is not None:
            validate_work_id(work_id)
            if holds_work is not None:
                await holds_work(work_id)
        await self.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        contention_until = loop.time() + max(wait, CONTENTION_S)
        while True:
            outcome, seen = await self._try_grant(
                holder,
                wanted,
                mode,
                contention_until,
                lambda now: grant(
                    self.names.project_id, holder, handle, wanted, mode, ttl, reason, work_id, now, branch
                ),
            )
            if isinstance(outcome, Lease):
                self._announce_soon("acquired", outcome)
                return outcome
            left = deadline - loop.time()
            if left <= 0:
                raise LeaseConflict(outcome)
            await self._wait_for_change(seen, min(left, _until_first_expiry(outcome, utcnow())))

    async def _try_grant(
        self,
        holder: str,
        wanted: list[str],
        mode: LeaseMode,
        contention_until: float,
        make: Callable[[datetime], Lease],
    ) -> tuple[Lease | list[Clash], int]:
        """One check-and-write: the lease granted, or what stands in the way (checked on an
        up-to-date copy), with the change count the check saw. This process's own acquires
        take turns (they would only make each other retry); other processes' writes make
        the server refuse ours, and the copy catches up before the check runs again."""
        mirror = await self.start()
        loop = asyncio.get_running_loop()
        synced = False
        async with self._granting:
            for attempt in itertools.count():
                now = utcnow()
                view, seen = mirror.revision, self._changes
                clashes = self.clashes(holder, wanted, mode, now)
                if clashes:
                    if synced:
                        return clashes, seen
                    await mirror.sync()  # refuse only on an up-to-date view
                    synced = True
                    continue
                lease = make(now)
                body = lease.to_json_bytes()
                seq = await publish_unchanged(
                    self._js, kv_subject(self.names.leases_bucket, lease.id), body, view
                )
                if seq is None:
                    if loop.time() > contention_until:
                        raise LeaseError(
                            "leases are being changed concurrently; try again",
                            field="patterns",
                            code="conflict",
                        )
                    await mirror.sync()  # a lease changed since the view: catch up, check again
                    if attempt > 2:
                        await cas_backoff(min(attempt, 8))
                    continue
                if not await mirror.own_write(lease.id, body, seq):
                    await mirror.wait_for(seq)
                return lease.model_copy(update={"token": seq}), seen
        raise AssertionError("unreachable")

    async def _wait_for_change(self, seen: int, timeout: float) -> None:
        """Until the copy applies a change after the ``seen``-th, or ``timeout``."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(timeout, 0.01)), self._changed:
                await self._changed.wait_for(lambda: self._changes > seen)

    async def get(self, lease_id: str) -> Lease:
        validate_id(lease_id, "lease_id")
        mirror = await self.start()
        await mirror.sync()
        stored = self._lease(lease_id)
        if stored is None:
            raise LeaseNotFound()
        return stored[0]

    async def _stored(self, lease_id: str) -> tuple[Lease, int]:
        """The lease and its revision from the copy, caught up once before saying it is gone."""
        stored = self._lease(lease_id)
        if stored is None:
            await (await self.start()).sync()
            stored = self._lease(lease_id)
            if stored is None:
                raise LeaseNotFound()
        return stored

    async def renew(self, lease_id: str, holder: str, ttl_s: float | None = None) -> Lease:
        validate_id(lease_id, "lease_id")
        ttl = None if ttl_s is None else check_ttl(ttl_s)
        mirror = await self.start()
        assert self._kv is not None
        read_at = 0

        async def read() -> tuple[Lease, int]:
            nonlocal read_at
            lease, read_at = await self._stored(lease_id)
            return lease, read_at

        swap = await cas_update(
            self._kv,
            lease_id,
            lambda lease: renew_rule(lease, read_at, holder, ttl, utcnow()),
            read=read,
            parse=Lease.model_validate_json,
            dump=Lease.to_json_bytes,
            absent=LeaseNotFound,
            conflict=_contended,
            on_lost=mirror.sync,
        )
        renewed = swap.after
        assert renewed is not None
        await mirror.wait_for(swap.revision)
        self._announce_soon("renewed", renewed)
        return renewed

    async def release(self, lease_id: str, *, holder: str | None, why: str = "released") -> Lease:
        """End a lease: by its ``holder`` (anyone else is refused), or with ``holder=None``
        by the fabric or an operator (``why`` then says which: ``revoked``, ``expired``...)."""
        validate_id(lease_id, "lease_id")
        mirror = await self.start()
        assert self._kv is not None

        def end(lease: Lease) -> Delete:
            if holder is not None and lease.holder != holder:
                raise NotHolder()
            return DELETE

        swap = await cas_update(
            self._kv,
            lease_id,
            end,
            read=lambda: self._stored(lease_id),
            parse=Lease.model_validate_json,
            dump=Lease.to_json_bytes,
            absent=LeaseNotFound,
            conflict=_contended,
            on_lost=mirror.sync,
        )
        lease = swap.before
        self._announce_soon("released" if holder is not None else _action(why), lease, why=why)
        return lease

    async def end_where(self, predicate: Callable[[Lease], str | None]) -> list[tuple[Lease, str]]:
        """End every stored lease ``predicate`` gives a reason for (the fabric's sweeps).
        A lease another process ended or changed meanwhile is left to it."""
        if self._mirror is None:
            return []
        ended: list[tuple[Lease, str]] = []
        for lease in self.leases():
            why = predicate(lease)
            if why is None:
                continue
            stored = self._lease(lease.id)
            if stored is None or self._kv is None:
                continue
            try:
                if await delete_unchanged(self._kv, lease.id, stored[1]):
                    self._announce_soon(_action(why), lease, why=why)
                    ended.append((lease, why))
            except Exception as exc:
                raise_if_cancelling()
                log.warning("lease %s: could not end it (%s): %s", lease.id, why, exc)
        return ended

    async def release_work(self, work_id: str, holder: str) -> list[Lease]:
        """The holder's leases for ``work_id`` (it no longer holds that item)."""
        if self._mirror is None:
            return []
        ended = await self.end_where(
            lambda lease: "work ended" if lease.work_id == work_id and lease.holder == holder else None
        )
        return [lease for lease, _ in ended]

    async def sweep(
        self,
        *,
        holder_online: Callable[[str], bool] | None = None,
        work_item: Callable[[str], WorkItem | None] | None = None,
        now: datetime | None = None,
    ) -> list[tuple[Lease, str]]:
        moment = now or utcnow()
        return await self.end_where(
            lambda lease: ended_by(lease, moment, holder_online=holder_online, work_item=work_item)
        )

    async def listing(self, filters: LeaseFilter | None = None, *, live_only: bool = True) -> list[Lease]:
        """Leases, soonest expiry first."""
        mirror = await self.start()
        await mirror.sync()
        now = utcnow()
        wanted = filters or LeaseFilter()
        found = [
            lease
            for lease in self.leases()
            if wanted.matches(lease) and (not live_only or is_live(lease, now))
        ]
        return sorted(found, key=lambda lease: (lease.expires_at, lease.id))

    # -- events ------------------------------------------------------------------------------------
    def _announce_soon(self, action: str, lease: Lease, **extra: Any) -> None:
        """Events tell what the bucket already says; they go out in the background so an
        acquire costs one round trip (a lost event is logged only)."""
        self._background.spawn(self._announce(action, lease, **extra), name=f"lease-event:{lease.id}")

    async def _announce(self, action: str, lease: Lease, **extra: Any) -> None:
        try:
            await publish_event(
                self._js,
                self.names,
                "lease",
                action,
                lease.id,
                {"lease": lease.model_dump(mode="json"), **extra},
                unacked=self._nc,
            )
        except Exception as exc:
            raise_if_cancelling()
            log.warning("lease %s: %s, but its event was not published: %s", lease.id, action, exc)

    async def settle(self) -> None:
        """Wait for events still being published (tests, shutdown)."""
        await self._background.wait()


def _contended() -> LeaseError:
    return LeaseError("being changed concurrently; try again", field="lease_id", code="conflict")


def _action(why: str) -> str:
    return {"expired": "expired", "holder offline": "ended", "work ended": "ended"}.get(why, "revoked")


def _until_first_expiry(clashes: Sequence[Clash], now: datetime) -> float:
    soonest = min(c.lease.expires_at for c in clashes)
    return max((soonest - now).total_seconds(), 0.0) + random.uniform(0.0, 0.05)


def _parse(slot: Slot[Lease]) -> Lease | None:
    """The slot's lease, parsed once (the copy then serves it without parsing again)."""
    if isinstance(slot.parsed, Lease):
        return slot.parsed
    try:
        slot.parsed = Lease.model_validate_json(slot.raw)
    except ValueError:
        log.warning("leases: skipping an unreadable record")
        return None
    return slot.parsed
