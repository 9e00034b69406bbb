"""The agent registry on JetStream KV (written by Warp, read by everyone).

Entries live in the project's bucket, keyed by agent id. Entries of scope
``personal`` or ``public`` are mirrored into the global bucket so agents of
other projects can discover them. Every write is revision-checked: a heartbeat
and a presence update racing each other both land instead of one clobbering
the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import CONFLICT, LoomError, NotFound
from shared.models import AgentEntry, AgentStatus, Scope, utcnow
from shared.names import GLOBAL_REGISTRY_BUCKET, ProjectNames, validate_agent_id
from shared.nats.cas import CAS_RETRIES, cas_update
from shared.nats.jetstream import delete_unchanged, ensure_kv, get_or_none, snapshot


class RegistryError(LoomError):
    pass


class AgentNotFound(RegistryError, NotFound):
    def __init__(self, agent_id: str) -> None:
        # The id is not repeated: the caller sent it, and it may not be an id at all.
        super().__init__("no agent with this id is registered in this project", field="agent_id")
        self.agent_id = agent_id


@dataclass(frozen=True)
class AgentFilter:
    """Discover filters; every given field must match (docs/warp.md, warp_registry_discover)."""

    capability: str | None = None
    agent_type: str | None = None
    status: AgentStatus | None = None
    boundary: str | None = None
    handle: str | None = None

    def matches(self, entry: AgentEntry, effective: AgentStatus) -> bool:
        return (
            (self.capability is None or self.capability in entry.capabilities)
            and (self.agent_type is None or entry.agent_type == self.agent_type)
            and (self.status is None or effective == self.status)
            and (self.boundary is None or self.boundary in entry.boundaries)
            and (self.handle is None or entry.handle == self.handle)
        )


class Registry:
    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self.names = names
        self._kv: KeyValue | None = None
        self._global: KeyValue | None = None

    async def ensure(self) -> None:
        if self._kv is None:
            self._kv = await ensure_kv(self._js, self.names.registry_bucket, description="Loom agents")
        if self._global is None:
            self._global = await ensure_kv(
                self._js, GLOBAL_REGISTRY_BUCKET, description="Loom personal/public agents"
            )

    async def _bucket(self) -> KeyValue:
        await self.ensure()
        assert self._kv is not None
        return self._kv

    async def _global_bucket(self) -> KeyValue:
        await self.ensure()
        assert self._global is not None
        return self._global

    # -- writes ---------------------------------------------------------------
    async def put(self, entry: AgentEntry) -> int:
        """Write the entry unconditionally (registration) and sync the global mirror."""
        if entry.project_id != self.names.project_id:
            raise RegistryError("project_id: an entry can only be written to its own project's registry")
        revision = int(await (await self._bucket()).put(entry.agent_id, entry.to_json_bytes()))
        await self._mirror(entry)
        return revision

    async def update(self, agent_id: str, mutate: Callable[[AgentEntry], AgentEntry]) -> AgentEntry:
        """Apply ``mutate`` to the current entry with compare-and-set, retrying on conflict."""
        entry, _ = await self.update_known(agent_id, mutate)
        return entry

    async def update_known(
        self,
        agent_id: str,
        mutate: Callable[[AgentEntry], AgentEntry],
        known: tuple[AgentEntry, int] | None = None,
    ) -> tuple[AgentEntry, int]:
        """:meth:`update`, first from ``known`` (the entry and revision its agent wrote last:
        one round trip instead of two while nobody else wrote it); returns the entry and
        the revision it now has."""
        validate_agent_id(agent_id)
        swap = await cas_update(
            await self._bucket(),
            agent_id,
            lambda entry: mutate(entry.model_copy(deep=True)),
            parse=AgentEntry.model_validate_json,
            dump=AgentEntry.to_json_bytes,
            absent=lambda: AgentNotFound(agent_id),
            conflict=lambda: RegistryError(
                f"could not update the entry after {CAS_RETRIES} concurrent writes; try again",
                field="agent_id",
                code=CONFLICT,
            ),
            known=known,
        )
        assert swap.after is not None
        await self._mirror(swap.after, previous=swap.before)
        return swap.after, swap.revision

    async def heartbeat(self, agent_id: str, status: AgentStatus | None = None) -> AgentEntry:
        def beat(entry: AgentEntry) -> AgentEntry:
            entry.last_heartbeat = utcnow()
            if status is not None:
                entry.status = status
            elif entry.status is AgentStatus.OFFLINE:
                entry.status = AgentStatus.ONLINE
            return entry

        return await self.update(agent_id, beat)

    async def mark_offline(self, agent_id: str) -> AgentEntry:
        def offline(entry: AgentEntry) -> AgentEntry:
            entry.status = AgentStatus.OFFLINE
            entry.last_activity = utcnow()
            return entry

        return await self.update(agent_id, offline)

    async def remove(self, agent_id: str) -> None:
        validate_agent_id(agent_id)
        kv = await self._bucket()
        if await get_or_none(kv, agent_id) is None:
            raise AgentNotFound(agent_id)
        await kv.delete(agent_id)
        await self._unmirror(agent_id)

    async def forget(self, agent_id: str, *, revision: int) -> bool:
        """Delete an entry (retention of offline agents) unless it changed since ``revision``:
        an agent that came back meanwhile keeps its entry. An agent whose entry went
        writes a new one when it next registers or beats."""
        if not await delete_unchanged(await self._bucket(), agent_id, revision):
            return False
        await self._unmirror(agent_id)
        return True

    async def _mirror(self, entry: AgentEntry, previous: AgentEntry | None = None) -> None:
        if entry.scope in (Scope.PERSONAL, Scope.PUBLIC):
            await (await self._global_bucket()).put(_global_key(entry), entry.to_json_bytes())
        elif previous is not None and previous.scope in (Scope.PERSONAL, Scope.PUBLIC):
            await self._unmirror(entry.agent_id)

    async def _unmirror(self, agent_id: str) -> None:
        kv = await self._global_bucket()
        key = f"{self.names.project_id}.{agent_id}"
        if await get_or_none(kv, key) is not None:
            await kv.delete(key)

    # -- reads ----------------------------------------------------------------
    async def get(self, agent_id: str) -> AgentEntry:
        validate_agent_id(agent_id)
        entry = await get_or_none(await self._bucket(), agent_id)
        if entry is None or not entry.value:
            raise AgentNotFound(agent_id)
        return AgentEntry.model_validate_json(entry.value)

    async def list_project(self) -> list[AgentEntry]:
        """Every entry of this project, in one pass over the bucket."""
        return await _read_all(await self._bucket())

    async def list_global(self) -> list[AgentEntry]:
        return await _read_all(await self._global_bucket())

    async def discover(
        self,
        *,
        viewer_agent_id: str,
        viewer_user_id: str,
        filters: AgentFilter | None = None,
    ) -> list[tuple[AgentEntry, AgentStatus]]:
        """Entries this viewer may see (by scope), redacted, with their effective status."""
        now = utcnow()
        wanted = filters or AgentFilter()
        seen: dict[str, AgentEntry] = {}
        for entry in await self.list_project():
            seen[entry.agent_id] = entry
        for entry in await self.list_global():
            seen.setdefault(entry.agent_id, entry)
        results: list[tuple[AgentEntry, AgentStatus]] = []
        for entry in seen.values():
            if not entry.visible_to(
                project_id=self.names.project_id, user_id=viewer_user_id, agent_id=viewer_agent_id
            ):
                continue
            effective = entry.effective_status(now)
            if wanted.matches(entry, effective):
                shown = entry.redacted_for(project_id=self.names.project_id, user_id=viewer_user_id)
                results.append((shown, effective))
        results.sort(key=lambda pair: (pair[0].handle, pair[0].agent_id))
        return results


def _global_key(entry: AgentEntry) -> str:
    return f"{entry.project_id}.{entry.agent_id}"


async def _read_all(kv: KeyValue) -> list[AgentEntry]:
    return [AgentEntry.model_validate_json(raw) for raw in (await snapshot(kv)).values()]
