"""The memory service: Pattern's domain logic over NATS KV, without MCP.

One instance serves one identity. :meth:`MemoryService.start` binds (or
creates) the three buckets and loads the index; every tool is one method that
takes the validated input model and returns the result model. Errors are
:class:`pattern.errors.PatternError` subclasses whose messages name the field.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import nats.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from pattern import pack, transfer
from pattern.access import Viewer
from pattern.buckets import ensure_bucket, server_supports_ttl
from pattern.build import DEFAULT_SHARES, Candidate, build, chat_shape, line
from pattern.config import PatternConfig, SecretScanMode
from pattern.errors import (
    AccessDeniedError,
    ChangedError,
    InvalidCategoryError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
    PatternError,
    ProtectedMemoryError,
    SecretBlockedError,
    StorageError,
    UnavailableError,
)
from pattern.importance import Tier
from pattern.index import Entry, MemoryIndex
from pattern.inputs import (
    MAX_TAGS,
    BuildContextInput,
    CleanupInput,
    CommitInsightInput,
    CoreMemoryInput,
    ExportInput,
    ForgetBulkInput,
    ForgetInput,
    ImportInput,
    PackInput,
    ReadInput,
    RecallInput,
    RememberBulkInput,
    RememberInput,
    RememberLearningInput,
    RememberTaskInput,
    RestoreInput,
    ShareLearningInput,
)
from pattern.keys import BucketNames, memory_key, owner_filter, scope_filter
from pattern.models import EXPIRING, SHARED_CATEGORIES, Category, MemoryRecord, Scope, new_id, utcnow
from pattern.recall import recall
from pattern.results import (
    BuildContextResult,
    BuiltItem,
    BulkForgetItem,
    BulkForgetResult,
    BulkRememberItem,
    BulkRememberResult,
    CleanupResult,
    CommitInsightResult,
    ExportResult,
    ForgetResult,
    HealthIdentity,
    HealthResult,
    ImportResult,
    LayerUse,
    MemoryView,
    OmittedItem,
    PackResult,
    ReadResult,
    RecallResult,
    RememberResult,
    ShareResult,
)
from pattern.sweep import AccessLog, sweep_every, write_back
from pattern.tiers import TierWalk
from pattern.watch import BucketWatch
from shared.agents.lineage import ancestors, record_lineage
from shared.context import tokens
from shared.context.store import ContextStore
from shared.context.tokens import TokenCounter
from shared.context.trees import ContextNode
from shared.identity import Identity
from shared.names import ProjectNames, kv_stream, kv_subject
from shared.nats.failures import NatsUnavailable, nats_failure
from shared.nats.jetstream import publish_unchanged
from shared.redact import redact
from shared.secretscan import scan

log = logging.getLogger("loom.pattern")

Clock = Callable[[], datetime]


class MemoryService:
    """Hierarchical agent memory for one identity, over NATS KV."""

    def __init__(
        self,
        nc: NatsClient,
        identity: Identity,
        config: PatternConfig | None = None,
        *,
        nats_url: str = "",
        clock: Clock = utcnow,
    ) -> None:
        self._nc = nc
        self._js = nc.jetstream(timeout=5.0)
        self.identity = identity
        self.config = config or PatternConfig()
        self.viewer = Viewer.of(identity)
        self.buckets = BucketNames.for_identity(identity.project_id, identity.user_id)
        self.index = MemoryIndex(self.config.expired_window_s)
        self.nats_url = nats_url
        self._clock = clock
        self._watches: list[BucketWatch] = []
        self._ttl_buckets: set[str] = set()
        self._write_lock = asyncio.Lock()
        self._contexts: ContextStore | None = None
        self._node_tokens: dict[tuple[str, str], int] = {}
        self._work_nodes: tuple[str, int, list[ContextNode]] = ("", -1, [])
        self.accesses = AccessLog()
        self._sweeper: asyncio.Task[None] | None = None
        self.tiers = TierWalk(self.index, self.accesses, self.config.importance)
        self._held_at: tuple[int, dict[str, int]] = (-1, {})
        self._layer_specs: dict[
            str, tuple[tuple[Scope, ...], tuple[Category, ...], Callable[[Entry], bool]]
        ] = {}
        self.ready = False

    @property
    def agent_id(self) -> str:
        return self.identity.agent_id

    @property
    def server_ttl(self) -> bool:
        return bool(self._ttl_buckets)

    # -- lifecycle ------------------------------------------------------------------
    async def start(self, timeout: float = 60.0) -> None:
        """Bind the buckets and load the index (idempotent)."""
        if self.ready:
            return
        async with self._nats("starting the memory service"):
            use_ttl = self.config.server_ttl
            if use_ttl is None:
                use_ttl = await server_supports_ttl(self._js)
            marker = float(self.config.expired_window_s) if use_ttl else None
            for bucket, what in (
                (self.buckets.project, f"Loom memory of project {self.identity.project_id}"),
                (self.buckets.user, "Loom personal memory of one user"),
                (self.buckets.public, "Loom public memory"),
            ):
                kv = await ensure_bucket(
                    self._js, bucket, marker_ttl_s=marker, replicas=self.config.replicas, description=what
                )
                status = await kv.status()
                if use_ttl and status.stream_info.config.allow_msg_ttl:
                    self._ttl_buckets.add(bucket)
            filters = [(self.buckets.project, owner_filter(Scope.PRIVATE, self.agent_id))]
            if self.identity.parent_id:
                names = ProjectNames(self.identity.project_id)
                await record_lineage(self._js, names, self.identity)
                self.viewer = Viewer.of(self.identity, await ancestors(self._js, names, self.identity))
                for ancestor in self.viewer.ancestors:  # read-only: a child never writes there
                    filters.append((self.buckets.project, owner_filter(Scope.PRIVATE, ancestor)))
            filters += [
                (self.buckets.project, scope_filter(Scope.TEAM)),
                (self.buckets.user, scope_filter(Scope.PERSONAL)),
                (self.buckets.public, scope_filter(Scope.PUBLIC)),
            ]
            self.index.begin_bulk()
            try:
                for bucket, key_filter in filters:
                    watch = BucketWatch(self._js, bucket, key_filter, self.index)
                    await watch.start()
                    self._watches.append(watch)
                await asyncio.wait_for(asyncio.gather(*(w.ready.wait() for w in self._watches)), timeout)
            finally:
                self.index.end_bulk()
        self.ready = True
        due = lambda: self.connected and bool(len(self.accesses))  # noqa: E731
        self._sweeper = asyncio.create_task(
            sweep_every(self.sweep, due, self.config.sweep_s), name="pattern-sweep"
        )
        log.info(
            "memory ready: %d memories visible (project %s, agent %s)",
            len(self.index),
            self.identity.project_id,
            self.agent_id,
        )

    async def close(self) -> None:
        """Stop following the buckets; the NATS connection belongs to the caller. Accesses
        counted since the last sweep are written first (when NATS is there)."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sweeper
        if self.ready and self._nc.is_connected and len(self.accesses):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.sweep(), 5.0)
        watches, self._watches = self._watches, []
        for watch in watches:
            await watch.stop()
        self.ready = False

    @asynccontextmanager
    async def _nats(self, doing: str) -> AsyncIterator[None]:
        """NATS failures as Pattern's ``NATS_ERROR``: unavailable (:class:`UnavailableError`)
        or refused (:class:`StorageError`), as :func:`shared.nats.failures.nats_failure`
        classifies them for every part, worded "... while <doing>"."""
        if not self._nc.is_connected:
            raise UnavailableError(
                f"NATS is not connected ({self.nats_url or 'server'}); reconnecting in the background — "
                "try again shortly"
            )
        try:
            yield
        except PatternError:
            raise
        except Exception as exc:
            found = nats_failure(exc, doing=doing)
            if isinstance(found, NatsUnavailable):
                raise UnavailableError(found.message) from exc
            if found is not None:
                raise StorageError(found.message) from exc
            if isinstance(exc, nats.errors.Error):  # one no part anticipates: still not a crash
                raise UnavailableError(redact(f"NATS error while {doing}: {exc}")) from exc
            raise

    def _require_ready(self) -> None:
        if not self.ready:
            raise UnavailableError("the memory service is still loading; try again shortly")

    def now(self) -> datetime:
        return self._clock()

    # -- storage --------------------------------------------------------------------
    def _where(self, record: MemoryRecord) -> tuple[str, str]:
        bucket = self.buckets.for_scope(record.scope)
        return bucket, memory_key(record.scope, record.agent_id, record.category, record.id)

    async def _put(self, record: MemoryRecord, *, expected: int | None = None) -> bool:
        """Store ``record``; with ``expected``, only if its key is still at that revision
        (compare-and-set: False when another writer changed it since)."""
        bucket, key = self._where(record)
        ttl: int | None = None
        if record.expires_at is not None and bucket in self._ttl_buckets:
            ttl = max(1, math.ceil((record.expires_at - self.now()).total_seconds()))
        subject, body, stream = kv_subject(bucket, key), record.model_dump_json().encode(), kv_stream(bucket)
        if expected is None:
            seq = int((await self._js.publish(subject, body, stream=stream, msg_ttl=ttl)).seq)
        else:
            written = await publish_unchanged(
                self._js, subject, body, expected, per_subject=True, stream=stream, msg_ttl=ttl
            )
            if written is None:
                return False
            seq = written
        self.index.put(bucket, key, record, seq)
        return True

    # -- importance: accesses, the sweep, tiers ----------------------------------------
    def tier(self, entry: Entry, now: datetime) -> Tier:
        return self.tiers.tier(entry, now)

    async def sweep(self) -> int:
        """Write the accesses counted since the last sweep into the records."""
        async with self._write_lock:
            return await write_back(self.accesses, self.index, self._put)

    @property
    def connected(self) -> bool:
        return self._nc.is_connected

    async def _purge(self, bucket: str, key: str) -> None:
        ttl = self.config.expired_window_s if bucket in self._ttl_buckets else None
        ack = await self._js.publish(
            kv_subject(bucket, key),
            b"",
            stream=kv_stream(bucket),
            headers={"KV-Operation": "PURGE", "Nats-Rollup": "sub"},
            msg_ttl=ttl,
        )
        self.index.remove(bucket, key, ack.seq)

    # -- lookups and rules ------------------------------------------------------------
    def _visible(self, memory_id: str, field: str, now: datetime) -> list[Entry]:
        """Every copy of the id this agent can see (refused, naming ``field``, if none)."""
        self.index.expire(now)
        found = [
            e
            for e in self.index.get(memory_id)
            if self.viewer.can_read(e.parts) and not e.record.is_expired(now)
        ]
        if not found:
            raise NotFoundError(
                "no memory with this id that you can see (it may have expired, been forgotten, "
                "or belong to another agent)",
                field=field,
            )
        return found

    def _find(self, memory_id: str, field: str = "memory_id") -> Entry:
        found = self._visible(memory_id, field, self.now())
        return max(found, key=lambda e: (e.record.updated_at, e.revision))

    def _own_count(self) -> int:
        return sum(n for (_, owner, _), n in self.index.counts().items() if owner == self.agent_id)

    def _check_limits(
        self,
        *,
        own: int = 0,
        core: int = 0,
        team: int = 0,
        field: str = "content",
    ) -> None:
        """Refuse a write that would add ``own``/``core``/``team`` memories past a limit."""
        limits = self.config.limits
        self.index.expire(self.now())
        counts = self.index.counts()
        mine = self._own_count()
        if own and mine + own > limits.max_per_agent:
            raise LimitExceededError(
                f"you already have {mine} memories; the limit is {limits.max_per_agent} per agent "
                "— forget some or run pattern_cleanup",
                field=field,
            )
        if core:
            n = sum(c for (_, o, cat), c in counts.items() if o == self.agent_id and cat is Category.CORE)
            if n + core > limits.max_core_per_agent:
                raise LimitExceededError(
                    f"you already have {n} core memories; the limit is {limits.max_core_per_agent} "
                    "— forget one with force=true first",
                    field=field,
                )
        if team:
            n = sum(c for (s, _, _), c in counts.items() if s is Scope.TEAM)
            if n + team > limits.max_shared_per_project:
                raise LimitExceededError(
                    f"project {self.identity.project_id} already has {n} team memories; the limit is "
                    f"{limits.max_shared_per_project}",
                    field=field,
                )

    def _check_new(self, scope: Scope, category: Category, field: str = "content") -> None:
        self._check_limits(
            own=1,
            core=1 if category is Category.CORE else 0,
            team=1 if scope is Scope.TEAM else 0,
            field=field,
        )

    def scan_secrets(self, text: str, field: str = "content") -> list[str]:
        mode = self.config.secret_scan
        if mode is SecretScanMode.OFF:
            return []
        findings = scan(text)
        if not findings:
            return []
        if mode is SecretScanMode.BLOCK:
            kinds = ", ".join(f"{f.kind} at character {f.offset}" for f in findings)
            raise SecretBlockedError(
                f"looks like it contains a secret ({kinds}); not stored because PATTERN_SECRET_SCAN=block",
                field=field,
            )
        return [f.warning(field) for f in findings]

    def _new_record(
        self,
        *,
        content: str,
        category: Category,
        scope: Scope,
        tags: list[str],
        priority: int,
        metadata: dict[str, str],
        source_id: str | None = None,
        memory_id: str | None = None,
    ) -> MemoryRecord:
        now = self.now()
        return MemoryRecord(
            id=memory_id or new_id(),
            scope=scope,
            category=category,
            content=content,
            tags=tags,
            priority=priority,
            metadata=metadata,
            agent_id=self.agent_id,
            project_id=self.identity.project_id,
            user_id=self.identity.user_id,
            handle=self.identity.handle,
            parent_id=self.identity.parent_id,
            created_at=now,
            updated_at=now,
            expires_at=now + timedelta(seconds=self.config.temporary_ttl_s) if category in EXPIRING else None,
            source_id=source_id,
        )

    async def _remember(
        self,
        *,
        content: str,
        category: Category,
        scope: Scope,
        tags: list[str],
        priority: int,
        metadata: dict[str, str],
        memory_id: str | None = None,
    ) -> RememberResult:
        self._require_ready()
        if category is Category.CORE and scope not in (Scope.PRIVATE, Scope.PERSONAL):
            raise InvalidCategoryError("core memories must be private or personal", field="scope")
        warnings = self.scan_secrets(content)
        record = self._new_record(
            content=content,
            category=category,
            scope=scope,
            tags=tags,
            priority=priority,
            metadata=metadata,
            memory_id=memory_id,
        )
        async with self._write_lock, self._nats("storing the memory"):
            self._check_new(scope, category)
            await self._put(record)
        return RememberResult(memory=MemoryView.of(record, self.agent_id), warnings=warnings)

    # -- tools ------------------------------------------------------------------------
    async def remember(self, req: RememberInput) -> RememberResult:
        if req.memory_id is not None and self.index.get(req.memory_id):
            return await self._new_version(req)
        return await self._remember(
            content=req.content,
            category=req.category,
            scope=req.scope,
            tags=req.tags,
            priority=req.priority,
            metadata=req.metadata,
            memory_id=req.memory_id,
        )

    async def _new_version(self, req: RememberInput) -> RememberResult:
        """A write to an existing id: its next version, by whoever writes it (its creator,
        or anyone for a team or public memory), compare-and-set on its revision."""
        assert req.memory_id is not None
        self._require_ready()
        entry = self._find(req.memory_id)
        old = entry.record
        if not (self.viewer.can_modify(entry.parts) or entry.parts.scope in (Scope.TEAM, Scope.PUBLIC)):
            raise AccessDeniedError(self.viewer.why_not_modify(entry.parts), field="memory_id")
        for name, given, kept in (("scope", req.scope, old.scope), ("category", req.category, old.category)):
            if given != kept:
                raise InvalidInputError(
                    f"memory {old.id} is {kept.value}; an existing memory keeps its {name} "
                    "(forget it and remember anew to move it)",
                    field=name,
                )
        warnings = self.scan_secrets(req.content)
        now = self.now()
        record = old.model_copy(
            update={
                "content": req.content,
                "tags": req.tags,
                "priority": req.priority,
                "metadata": req.metadata,
                "version": old.version + 1,
                "updated_by": self.agent_id,
                "updated_at": now,
                "expires_at": now + timedelta(seconds=self.config.temporary_ttl_s)
                if old.category in EXPIRING
                else None,
            }
        )
        async with self._write_lock, self._nats("storing the new version"):
            if not await self._put(record, expected=entry.revision):
                raise ChangedError(
                    "another agent wrote a new version of it meanwhile; read it (pattern_read) and try again",
                    field="memory_id",
                )
        return RememberResult(memory=MemoryView.of(record, self.agent_id), warnings=warnings)

    async def remember_task(self, req: RememberTaskInput) -> RememberResult:
        return await self._remember(
            content=req.content,
            category=Category.TASKS,
            scope=req.scope,
            tags=req.tags,
            priority=req.priority,
            metadata=req.metadata,
        )

    async def remember_learning(self, req: RememberLearningInput) -> RememberResult:
        return await self._remember(
            content=req.content,
            category=Category.LEARNINGS,
            scope=req.scope,
            tags=req.tags,
            priority=req.priority,
            metadata=req.metadata,
        )

    async def core_memory(self, req: CoreMemoryInput) -> RememberResult:
        return await self._remember(
            content=req.content,
            category=Category.CORE,
            scope=Scope(req.scope),
            tags=req.tags,
            priority=req.priority,
            metadata=req.metadata,
        )

    async def commit_insight(self, req: CommitInsightInput) -> CommitInsightResult:
        self._require_ready()
        entry = self._find(req.memory_id)
        if not self.viewer.can_modify(entry.parts):
            raise AccessDeniedError(self.viewer.why_not_modify(entry.parts), field="memory_id")
        old = entry.record
        if old.category is Category.CORE:
            raise ProtectedMemoryError("is a core memory, which is already permanent", field="memory_id")
        tags = list(old.tags)
        for tag in req.tags or ():
            if tag not in tags:
                tags.append(tag)
        if len(tags) > MAX_TAGS:
            raise InvalidInputError(
                f"the memory would have {len(tags)} tags; at most {MAX_TAGS}", field="tags"
            )
        if req.content is not None:
            self.scan_secrets(req.content)
        record = old.model_copy(
            update={
                "category": Category.LONGTERM,
                "content": req.content if req.content is not None else old.content,
                "tags": tags,
                "priority": req.priority if req.priority is not None else old.priority,
                "updated_at": self.now(),
                "expires_at": None,
                "version": old.version + 1,
                "updated_by": self.agent_id,
            }
        )
        async with self._write_lock, self._nats("committing the insight"):
            await self._put(record)
            new_where = self._where(record)
            if (entry.bucket, entry.key) != new_where:
                await self._purge(entry.bucket, entry.key)
        return CommitInsightResult(
            memory=MemoryView.of(record, self.agent_id), previous_category=old.category
        )

    async def forget(self, req: ForgetInput) -> ForgetResult:
        self._require_ready()
        entry = self._forgettable(req.memory_id, req.force)
        async with self._write_lock, self._nats("forgetting the memory"):
            await self._purge(entry.bucket, entry.key)
        return ForgetResult(memory_id=entry.record.id, scope=entry.parts.scope, category=entry.parts.category)

    def _forgettable(self, memory_id: str, force: bool, field: str = "memory_id") -> Entry:
        entry = self._find(memory_id, field)
        if not self.viewer.can_modify(entry.parts):
            raise AccessDeniedError(self.viewer.why_not_modify(entry.parts), field=field)
        if entry.parts.category is Category.CORE and not force:
            raise ProtectedMemoryError(
                f"memory {memory_id} is a core memory and protected; pass force=true to forget it",
                field="force",
            )
        return entry

    async def recall_context(self, req: RecallInput) -> RecallResult:
        self._require_ready()
        if not self._nc.is_connected:
            raise UnavailableError(f"NATS is not connected ({self.nats_url or 'server'}); try again shortly")
        now = self.now()
        picked: list[Entry] = []
        found = recall(self.index, self.viewer, req, now, self.config.limits.summary_bytes, picked)
        self.accesses.touch(picked, now)
        for view, entry in zip(found.memories, picked, strict=True):
            view.tier = self.tier(entry, now)
        return found

    async def read_memory(self, req: ReadInput) -> ReadResult:
        return self.read_by_id(req.memory_id)

    def read_by_id(self, memory_id: str, field: str = "memory_id") -> ReadResult:
        """One memory by id, as the scope order finds it first: your own, then your parent
        chain's, the team's, your user's, the public one. Counts as a read."""
        self._require_ready()
        now = self.now()
        found = self._visible(memory_id, field, now)
        entry = min(found, key=lambda e: (self._scope_rank(e), -e.revision))
        self.accesses.touch([entry], now)
        view = MemoryView.of(entry.record, self.agent_id)
        view.tier = self.tier(entry, now)
        return ReadResult(memory=view, found_in=self._found_in(entry))

    async def pack(self, req: PackInput) -> PackResult:
        """Store a working state and return the context to start over with (pattern/pack.py)."""
        self._require_ready()
        return await pack.pack(self, req)

    async def restore(self, req: RestoreInput) -> PackResult:
        self._require_ready()
        return await pack.restore(self, req)

    def _scope_rank(self, entry: Entry) -> int:
        owner, scope = entry.parts.owner, entry.parts.scope
        if owner == self.agent_id:
            return 0
        if self.viewer.inherits_from(owner):
            return 1
        return {Scope.TEAM: 2, Scope.PERSONAL: 3, Scope.PUBLIC: 4}.get(scope, 5)

    def _found_in(self, entry: Entry) -> str:
        return ("own", "inherited", "team", "personal", "public", "other")[self._scope_rank(entry)]

    async def build_context(self, req: BuildContextInput) -> BuildContextResult:
        """The context to load for a task within a token budget (``pattern/build.py``)."""
        self._require_ready()
        if req.work_id is not None:
            from shared.context.trees import readable

            async with self._nats("reading the work item's context"):
                state = await self.contexts().tree(req.work_id)
            if not state.exists:
                raise NotFoundError("no work item context with this id in this project", field="work_id")
            tree, size, nodes = self._work_nodes
            if tree != req.work_id or size != state.size:
                nodes = [
                    n
                    for n in (state.latest(f) for f in state.newest_first())
                    if n.text and readable(n, agent_id=self.agent_id, user_id=self.identity.user_id)
                ]
                self._work_nodes = (req.work_id, state.size, nodes)
        else:
            nodes = []
        counter = tokens.counter() if tokens.loaded() else await asyncio.to_thread(tokens.counter)
        now = self.now()
        self.index.expire(now)
        shares: dict[str, float] = dict(DEFAULT_SHARES)
        if req.shares is not None:
            shares = {layer: share for layer, share in req.shares.items()}
        tiers: set[str] | None = set(req.tiers) if req.tiers is not None else None
        built = build(req.budget_tokens, shares, self._layers(nodes, counter, now, tiers), counter)
        return BuildContextResult(
            counter=built.counter,
            budget_tokens=built.budget,
            used_tokens=built.used,
            context=built.text,
            items=[
                BuiltItem(layer=c.layer, id=c.id, kind=c.kind, tokens=c.tokens, text=c.text)
                for c in built.items
            ],
            layers=[
                LayerUse(layer=u.name, **{k: v for k, v in vars(u).items() if k != "name"})
                for u in built.layers
            ],
            omitted=[
                OmittedItem(layer=o.layer, id=o.id, reason=o.reason, tier=o.tier) for o in built.omitted
            ],
            omitted_total=built.omitted_total,
            omitted_by_tier=built.omitted_by_tier,
            chat=chat_shape(built.items) if req.shape == "chat" else None,
        )

    def contexts(self) -> ContextStore:
        """The project's context trees (the work layer of a build)."""
        if self._contexts is None:
            self._contexts = ContextStore(self._nc, ProjectNames(self.identity.project_id), js=self._js)
        return self._contexts

    def _layers(
        self, nodes: list[ContextNode], counter: TokenCounter, now: datetime, tiers: set[str] | None = None
    ) -> dict[str, tuple[Iterator[Candidate], int]]:
        """Each layer's candidates (lazily, in order) and how many it holds."""
        me, chain = self.agent_id, set(self.viewer.ancestors)
        personal = (Scope.PRIVATE, Scope.PERSONAL)
        others = [c for c in Category if c is not Category.CORE]

        def memories(
            layer: str, scopes: Iterable[Scope], categories: Iterable[Category], owned: Callable[[str], bool]
        ) -> tuple[Iterator[Candidate], int]:
            def accept(entry: Entry) -> bool:
                return (
                    owned(entry.parts.owner)
                    and not entry.record.is_expired(now)
                    and self.viewer.can_read(entry.parts)
                )

            def walk() -> Iterator[Candidate]:
                for entry, tier in self.tiers.walk(scopes, categories, accept, now, tiers):
                    record = entry.record
                    if entry.tokens < 0:
                        entry.tokens = counter.count(line(layer, record.category.value, record.content))
                    yield Candidate(
                        layer,
                        record.id,
                        record.category.value,
                        record.content,
                        entry.tokens,
                        record.source_id,
                        tier.value,
                    )

            return walk(), held[layer]

        def work() -> Iterator[Candidate]:
            for node in nodes:
                key = (node.id, node.kind)
                counted = self._node_tokens.get(key)
                if counted is None:
                    counted = self._node_tokens[key] = counter.count(line("work", node.kind, node.text or ""))
                yield Candidate("work", node.id, node.kind, node.text or "", counted)

        def mine(owner: str) -> bool:
            return owner == me

        def inherited(owner: str) -> bool:
            return owner in chain

        def others_than_me(owner: str) -> bool:
            return owner != me

        shared = sorted(SHARED_CATEGORIES)
        held = self._held(me, chain)
        return {
            "core": memories("core", personal, [Category.CORE], mine),
            "work": (work(), len(nodes)),
            "own": memories("own", tuple(Scope), others, mine),
            "inherited": memories("inherited", [Scope.PRIVATE], others, inherited),
            "team": memories("team", [Scope.TEAM], shared, others_than_me),
        }

    def _held(self, me: str, chain: set[str]) -> dict[str, int]:
        """How many memories each layer holds: one pass over the index's counters, kept
        until the index changes."""
        if self._held_at[0] == self.index.version:
            return self._held_at[1]
        held = {"core": 0, "own": 0, "inherited": 0, "team": 0}
        for (scope, owner, category), n in self.index.counts().items():
            if owner == me:
                if category is not Category.CORE:
                    held["own"] += n
                elif scope in (Scope.PRIVATE, Scope.PERSONAL):
                    held["core"] += n
            elif scope is Scope.TEAM and category in SHARED_CATEGORIES:
                held["team"] += n
            elif scope is Scope.PRIVATE and owner in chain and category is not Category.CORE:
                held["inherited"] += n
        self._held_at = (self.index.version, held)
        return held

    async def share_learning(self, req: ShareLearningInput) -> ShareResult:
        self._require_ready()
        entry = self._find(req.memory_id)
        old = entry.record
        if entry.parts.owner != self.agent_id:
            raise AccessDeniedError("you can only share memories you created", field="memory_id")
        if old.category is Category.CORE:
            raise ProtectedMemoryError(
                "core memories cannot be shared; store a copy with pattern_remember_learning",
                field="memory_id",
            )
        scope = Scope(req.scope)
        if req.category is not None:
            category = Category(req.category)
        else:
            category = old.category if old.category in SHARED_CATEGORIES else Category.LEARNINGS
        if old.scope is scope and old.category is category and req.mode == "move":
            raise InvalidInputError(
                f"memory is already a {scope.value} {category.value} memory", field="scope"
            )
        warnings = self.scan_secrets(old.content)
        now = self.now()
        if req.mode == "copy":
            record = self._new_record(
                content=old.content,
                category=category,
                scope=scope,
                tags=list(old.tags),
                priority=old.priority,
                metadata=dict(old.metadata),
                source_id=old.id,
            )
        else:
            record = old.model_copy(
                update={"scope": scope, "category": category, "updated_at": now, "expires_at": None}
            )
        async with self._write_lock, self._nats("sharing the memory"):
            if req.mode == "copy":
                self._check_new(scope, category, field="scope")
            elif scope is Scope.TEAM and old.scope is not Scope.TEAM:
                self._check_limits(team=1, field="scope")
            await self._put(record)
            if req.mode == "move" and (entry.bucket, entry.key) != self._where(record):
                await self._purge(entry.bucket, entry.key)
        return ShareResult(
            memory=MemoryView.of(record, self.agent_id), source_id=old.id, mode=req.mode, warnings=warnings
        )

    async def cleanup(self, req: CleanupInput) -> CleanupResult:
        """Remove the caller's own expired (or, with ``older_than_hours``, old) temporary memories.

        Reads NATS rather than the index: this is the backstop for a server
        that did not expire them, and the index already hides expired ones.
        """
        self._require_ready()
        now = self.now()
        cutoff = now - timedelta(hours=req.older_than_hours) if req.older_than_hours is not None else None
        victims: list[Entry] = []
        async with self._nats("cleaning up"):
            for scope in Scope:
                bucket = self.buckets.for_scope(scope)
                for cat in sorted(set(req.categories)):
                    key_filter = f"{scope.value}.{self.agent_id}.{cat}.*"
                    for entry in await _scan(self._js, bucket, key_filter):
                        r = entry.record
                        if r.agent_id != self.agent_id:
                            continue
                        if r.is_expired(now) or (cutoff is not None and r.created_at <= cutoff):
                            victims.append(entry)
            if not req.dry_run:
                async with self._write_lock:
                    for entry in victims:
                        await self._purge(entry.bucket, entry.key)
        ids = [e.record.id for e in victims]
        return CleanupResult(dry_run=req.dry_run, removed=ids, count=len(ids))

    async def remember_bulk(self, req: RememberBulkInput) -> BulkRememberResult:
        self._require_ready()
        items: list[BulkRememberItem] = []
        for i, m in enumerate(req.memories):
            try:
                res = await self._remember(
                    content=m.content,
                    category=m.category,
                    scope=m.scope,
                    tags=m.tags,
                    priority=m.priority,
                    metadata=m.metadata,
                )
            except UnavailableError:
                raise
            except PatternError as exc:
                items.append(BulkRememberItem(index=i, error=f"memories.{i}.{exc}"))
                continue
            items.append(BulkRememberItem(index=i, memory_id=res.memory.id, warnings=res.warnings))
        stored = sum(1 for i in items if i.memory_id)
        return BulkRememberResult(stored=stored, failed=len(items) - stored, items=items)

    async def forget_bulk(self, req: ForgetBulkInput) -> BulkForgetResult:
        self._require_ready()
        items: list[BulkForgetItem] = []
        for memory_id in dict.fromkeys(req.memory_ids):
            try:
                entry = self._forgettable(memory_id, req.force)
                async with self._write_lock, self._nats("forgetting memories"):
                    await self._purge(entry.bucket, entry.key)
            except UnavailableError:
                raise
            except PatternError as exc:
                items.append(BulkForgetItem(memory_id=memory_id, forgotten=False, error=str(exc)))
                continue
            items.append(BulkForgetItem(memory_id=memory_id, forgotten=True))
        done = sum(1 for i in items if i.forgotten)
        return BulkForgetResult(forgotten=done, failed=len(items) - done, items=items)

    async def export_memories(self, req: ExportInput) -> ExportResult:
        self._require_ready()
        return await transfer.export_memories(self, req)

    async def import_memories(self, req: ImportInput) -> ImportResult:
        self._require_ready()
        return await transfer.import_memories(self, req)

    def own_entries(self) -> list[Entry]:
        now = self.now()
        self.index.expire(now)
        return [
            e for e in self.index.entries() if e.parts.owner == self.agent_id and not e.record.is_expired(now)
        ]

    async def store_imported(self, record: MemoryRecord, *, dry_run: bool, planned: Counter[str]) -> None:
        """Check limits for, and unless ``dry_run`` write, one re-homed record (used by import).

        ``planned`` counts what a dry run has admitted so far, so the limits see it too.
        """
        is_core = record.category is Category.CORE
        is_team = record.scope is Scope.TEAM
        async with self._write_lock, self._nats("importing memories"):
            self._check_limits(
                own=1 + planned["own"],
                core=(1 + planned["core"]) if is_core else 0,
                team=(1 + planned["team"]) if is_team else 0,
                field="path",
            )
            if not dry_run:
                await self._put(record)
                return
        planned["own"] += 1
        planned["core"] += int(is_core)
        planned["team"] += int(is_team)

    def health(self) -> HealthResult:
        i = self.identity
        limits = self.config.limits
        return HealthResult(
            status="ok"
            if self.ready and self._nc.is_connected
            else ("starting" if not self.ready else "unavailable"),
            nats_url=self.nats_url,
            connected=self._nc.is_connected,
            error=None if self._nc.is_connected else "NATS connection lost; reconnecting",
            identity=HealthIdentity(
                agent_id=i.agent_id,
                project_id=i.project_id,
                user_id=i.user_id,
                handle=i.handle,
                parent_id=i.parent_id,
                subagent_type=i.subagent_type,
            ),
            buckets={
                "project": self.buckets.project,
                "user": self.buckets.user,
                "public": self.buckets.public,
            },
            index_ready=self.ready,
            memories_indexed=len(self.index),
            own_memories=self._own_count(),
            server_ttl=self.server_ttl,
            temporary_ttl_s=self.config.temporary_ttl_s,
            secret_scan=self.config.secret_scan.value,
            export_dir=str(self.config.export_root(i.project_path)),
            limits={
                "content_bytes": limits.max_content_bytes,
                "per_agent": limits.max_per_agent,
                "team_per_project": limits.max_shared_per_project,
                "core_per_agent": limits.max_core_per_agent,
                "recall_limit": limits.max_recall,
                "summary_bytes": limits.summary_bytes,
            },
        )


async def _scan(js: JetStreamContext, bucket: str, key_filter: str, timeout: float = 30.0) -> list[Entry]:
    """Current values under ``key_filter``, read from NATS (not the index)."""
    temp = MemoryIndex()
    watch = BucketWatch(js, bucket, key_filter, temp)
    await watch.start()
    try:
        await asyncio.wait_for(watch.ready.wait(), timeout)
    finally:
        await watch.stop()
    return list(temp.entries())
