"""Spin-up targets of one project, in its targets KV bucket.

Layout: ``t.<id>`` holds the :class:`~shared.models.Target`; ``n.<name>``
holds the id that owns the name. Creating the name key with ``create``
(compare-and-set on "does not exist") is what keeps names unique per project
even with several Weft replicas writing at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import Conflict, Invalid, NotFound, shown_name
from shared.events import ensure_events_stream, publish_event
from shared.models import Target, TargetSpec, utcnow
from shared.names import ProjectNames
from shared.nats.cas import OnLost, Swap, cas_update, cas_upsert
from shared.nats.jetstream import (
    create_if_absent,
    delete_unchanged,
    ensure_kv,
    get_or_none,
)
from shared.nats.mirror import BucketMirror, model_parser
from shared.paging import CursorError, Page, decode_cursor, encode_cursor
from weft.targets.redaction import merge_masked, redact_config

log = logging.getLogger("loom.weft.targets")

_ID_LEN = 32
SPEC_FIELDS = tuple(TargetSpec.model_fields)


class TargetNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("no target with this id or name in this project", field="target")


def _target_key(target_id: str) -> str:
    return f"t.{target_id}"


def _name_key(name: str) -> str:
    return f"n.{name}"


def public_view(target: Target) -> dict[str, Any]:
    """What responses and events show: the target with secrets in ``config`` masked."""
    data = target.model_dump(mode="json")
    data["config"] = redact_config(data.get("config", {}))
    return data


class TargetStore:
    def __init__(self, nc: NatsClient, js: JetStreamContext, names: ProjectNames) -> None:
        self._nc = nc
        self._js = js
        self.names = names
        self._kv: KeyValue | None = None
        self._mirror: BucketMirror[Target] | None = None

    async def start(self) -> None:
        await ensure_events_stream(self._js, self.names)  # every change is announced there
        self._kv = await ensure_kv(self._js, self.names.targets_bucket, description="Loom spin-up targets")
        self._mirror = BucketMirror(
            self._js, self.names.targets_bucket, model_parser(Target), keys="t.*", nc=self._nc
        )
        await self._mirror.start()

    async def stop(self) -> None:
        if self._mirror is not None:
            await self._mirror.stop()

    @property
    def kv(self) -> KeyValue:
        assert self._kv is not None, "TargetStore.start() was not awaited"
        return self._kv

    @property
    def mirror(self) -> BucketMirror[Target]:
        assert self._mirror is not None, "TargetStore.start() was not awaited"
        return self._mirror

    # -- reads -------------------------------------------------------------------
    def all(self) -> list[Target]:
        """Every target as last seen (no round trip; for routing)."""
        return sorted(self.mirror.values(), key=lambda t: t.name)

    async def list_page(
        self,
        *,
        mechanism: str | None = None,
        enabled: bool | None = None,
        capability: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Target]:
        await self.mirror.sync()
        after = decode_cursor(cursor)
        last: str | None = None
        if after is not None:
            if not isinstance(after.get("name"), str):
                raise CursorError()
            last = after["name"]
        matching = [
            t
            for t in self.all()
            if (mechanism is None or t.mechanism == mechanism)
            and (enabled is None or t.enabled == enabled)
            and (capability is None or capability in t.capabilities)
        ]
        total = len(matching)
        if last is not None:
            matching = [t for t in matching if t.name > last]
        page = matching[:limit]
        more = len(matching) > limit
        return Page(
            items=page, next_cursor=encode_cursor({"name": page[-1].name}) if more else None, total=total
        )

    async def resolve(self, ref: str) -> Target:
        """A target by id or, failing that, by name."""
        await self.mirror.sync()
        if len(ref) == _ID_LEN:
            found = self.mirror.get(_target_key(ref))
            if found is not None:
                return found
        for target in self.mirror.values():
            if target.name == ref:
                return target
        raise TargetNotFound()

    # -- writes --------------------------------------------------------------------
    async def _seen(self, revision: int) -> None:
        """Read-your-writes: routing and spin-up read the copy right after a change."""
        await self.mirror.wait_for(revision)

    async def create(self, spec: TargetSpec) -> Target:
        target = Target(**spec.model_dump(), project_id=self.names.project_id)
        await self._claim_name(target.name, target.id)
        await self._seen(await self.kv.create(_target_key(target.id), target.to_json_bytes()))
        await self._event("created", target)
        return target

    async def _claim_name(self, name: str, target_id: str) -> None:
        key = _name_key(name)
        if await create_if_absent(self.kv, key, target_id.encode()):
            return

        async def claim(owner: str | None) -> str | None:
            if owner == target_id:
                return None
            if owner and await self._exists(owner):
                raise Conflict("a target with this name already exists in this project", field="name")
            return target_id  # free again, or left behind by an interrupted delete or rename: take it

        await cas_upsert(
            self.kv,
            key,
            claim,
            parse=bytes.decode,
            dump=str.encode,
            conflict=lambda: Conflict("this name is being changed concurrently; try again", field="name"),
        )

    async def _release_name(self, name: str, target_id: str) -> None:
        key = _name_key(name)
        entry = await get_or_none(self.kv, key)
        if entry is not None and (entry.value or b"").decode() == target_id:
            await delete_unchanged(self.kv, key, int(entry.revision or 0))  # changed: not ours now

    async def _exists(self, target_id: str) -> bool:
        return await get_or_none(self.kv, _target_key(target_id)) is not None

    async def update(
        self, ref: str, change: Callable[[Target], Target], *, action: str = "updated"
    ) -> Target:
        """Compare-and-set ``change`` onto a target (renames keep the name index right)."""
        current = await self.resolve(ref)
        claimed: str | None = None  # a new name claimed for a write not yet landed (released if it loses)

        async def changed(before: Target) -> Target:
            nonlocal claimed
            after = change(before.model_copy(deep=True))
            after.id, after.project_id, after.created_at = before.id, before.project_id, before.created_at
            after.updated_at = utcnow()
            if after.name != before.name:
                await self._claim_name(after.name, after.id)
                claimed = after.name
            return after

        async def lost() -> None:
            nonlocal claimed
            if claimed is not None:
                await self._release_name(claimed, current.id)
                claimed = None

        swap = await self._swap(current.id, changed, on_lost=lost)
        before, after = swap.before, swap.after
        assert after is not None
        await self._seen(swap.revision)
        if after.name != before.name:
            await self._release_name(before.name, before.id)
        await self._event(action, after, previous_name=before.name if after.name != before.name else None)
        return after

    async def _swap(
        self,
        target_id: str,
        decide: Callable[[Target], Target | Awaitable[Target | None] | None],
        *,
        on_lost: OnLost | None = None,
    ) -> Swap[Target]:
        """Compare-and-set ``decide`` onto the target's record (None: left as it is)."""
        return await cas_update(
            self.kv,
            _target_key(target_id),
            decide,
            parse=Target.model_validate_json,
            dump=Target.to_json_bytes,
            absent=TargetNotFound,
            conflict=lambda: Conflict("this target is being changed concurrently; try again", field="target"),
            on_lost=on_lost,
        )

    async def record(self, ref: str, action: str, **fields: Any) -> Target:
        """Set fields Weft itself maintains (health verdicts, last start) and announce it
        as ``target.<action>``; compare-and-set like every other change."""

        def apply(target: Target) -> Target:
            return target.model_copy(update=fields)

        return await self.update(ref, apply, action=action)

    async def patch(
        self, ref: str, changes: dict[str, Any], *, check: Callable[[TargetSpec], None] | None = None
    ) -> Target:
        """Apply a partial spec; the result is validated as a whole :class:`TargetSpec`.

        Raises pydantic's ``ValidationError`` (field-level) for an invalid result.
        """
        unknown = sorted(set(changes) - set(SPEC_FIELDS))
        if unknown:
            raise Invalid("not a target field", field=shown_name(unknown[0]))

        def apply(target: Target) -> Target:
            spec = target.model_dump(include=set(SPEC_FIELDS))
            for name, value in changes.items():
                spec[name] = merge_masked(value, spec.get("config")) if name == "config" else value
            checked = TargetSpec.model_validate(spec)
            if check is not None:
                check(checked)
            return Target.model_validate({**target.model_dump(), **checked.model_dump()})

        # Validate once up front so a bad patch fails before any write.
        apply((await self.resolve(ref)).model_copy(deep=True))
        return await self.update(ref, apply)

    async def set_enabled(self, ref: str, enabled: bool) -> Target:
        def toggle(target: Target) -> Target:
            target.enabled = enabled
            if enabled:  # an operator's enable resets its circuit breaker
                target.tripped_at = target.tripped_reason = None
            return target

        return await self.update(ref, toggle, action="enabled" if enabled else "disabled")

    async def trip(self, ref: str, reason: str) -> Target | None:
        """Disable an enabled target whose starts keep failing (its circuit breaker) and
        announce it (``target.tripped``); None when it was disabled already (by an operator,
        or by another replica's trip a moment ago), so it is announced once."""
        current = await self.resolve(ref)
        now = utcnow()

        def disable(before: Target) -> Target | None:
            if not before.enabled:
                return None
            return before.model_copy(
                update={"enabled": False, "tripped_at": now, "tripped_reason": reason, "updated_at": now}
            )

        swap = await self._swap(current.id, disable)
        if not swap.changed or swap.after is None:
            return None
        await self._seen(swap.revision)
        await self._event("tripped", swap.after)
        return swap.after

    async def delete(self, ref: str) -> Target:
        target = await self.resolve(ref)
        key = _target_key(target.id)
        # compare-and-set on the revision the copy holds: of two replicas deleting at once,
        # one deletes (and announces it) and the other answers 404 or 409
        if not await delete_unchanged(self.kv, key, self.mirror.revision_of(key) or 0):
            await self.mirror.sync()
            if self.mirror.get(key) is None:
                raise TargetNotFound()
            raise Conflict("this target changed while being removed; try again", field="target")
        await self.mirror.sync()
        await self._release_name(target.name, target.id)
        await self._event("deleted", target)
        return target

    async def _event(self, action: str, target: Target, **extra: Any) -> None:
        data: dict[str, Any] = {"target": public_view(target)}
        data.update({k: v for k, v in extra.items() if v is not None})
        try:
            await publish_event(self._js, self.names, "target", action, target.id, data)
        except Exception as exc:
            log.warning("could not publish target.%s for %s: %s", action, target.id, exc)
