"""Everything that needs a live NATS connection, built once it is up.

Imported lazily (off the event loop) by :mod:`warp.runtime`, so that the MCP
handshake is answered before nats-py and the JetStream layer are even loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.agents.registry import Registry
from shared.context.store import ContextStore
from shared.context.threads import Threads
from shared.context.trees import CreationRate
from shared.git.repository import RepositoryStore
from shared.identity import Identity
from shared.leases.book import LeaseBook
from shared.names import ProjectNames
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from warp.channels import ChannelService
from warp.config import ConfigLoader
from warp.instances import InstanceLock
from warp.messages import InboxService
from warp.presence import Presence
from warp.settings import WarpSettings
from warp.workstreams import Workstreams


@dataclass
class Services:
    nc: NatsClient
    js: JetStreamContext
    names: ProjectNames
    identity: Identity
    lock: InstanceLock
    registry: Registry
    channels: ChannelService
    inbox: InboxService
    work: WorkQueue
    questions: QuestionBook
    presence: Presence
    contexts: ContextStore
    """The context trees, shared with the work queue (one copy of each tree)."""
    threads: Threads
    leases: LeaseBook
    traces: TraceLog
    """The spans this process makes of the project's items; kept across reconnects (it holds
    no knowledge of the server)."""
    ledger: UsageLedger
    workstreams: Workstreams
    """The items this agent works on in worktrees of their own (docs/workstreams.md)."""
    tree_rate: CreationRate
    """Trees this agent may still create this minute (kept across reconnects)."""

    @property
    def agent_id(self) -> str:
        return self.identity.agent_id

    def rebuild_after_reconnect(self) -> None:
        """The server may have lost its state (a fresh server): forget every cached
        "this stream/bucket/consumer exists" so the next call ensures it again."""
        self.channels.forget()
        self.inbox.forget()
        self.lock.forget()
        self.registry = Registry(self.js, self.names)
        self.presence.registry = self.registry
        self.contexts = ContextStore(self.nc, self.names, js=self.js)
        self.ledger = UsageLedger(self.js, self.names)
        self.work = WorkQueue(
            self.nc,
            self.names,
            js=self.js,
            contexts=self.contexts,
            traces=self.traces,
            ledger=self.ledger,
            ack_wait_s=self.work.ack_wait_s,
        )
        self.questions = QuestionBook(self.nc, self.names, self.work, js=self.js)
        self.threads = Threads(self.nc, self.names, self.contexts)
        self.workstreams.repositories = RepositoryStore(self.js, self.names)


async def build(
    nc: NatsClient,
    names: ProjectNames,
    base: Identity,
    settings: WarpSettings,
    loader: ConfigLoader,
    *,
    explicit_instance: int | None,
    handle: Callable[[], str],
) -> Services:
    """Take an instance id, then wire the services for it."""
    js = nc.jetstream(timeout=settings.op_timeout_s)
    lock = InstanceLock(js, names, hostname=base.hostname)
    identity = await lock.acquire(base, explicit_instance)
    if identity.parent_id is not None:  # so a sub-agent of this sub-agent finds its whole chain
        from shared.agents.lineage import record_lineage

        await record_lineage(js, names, identity)
    registry = Registry(js, names)
    presence = Presence(registry, js, names, identity, settings, handle=handle)
    contexts = ContextStore(nc, names, js=js)
    traces = TraceLog(nc, names)
    ledger = UsageLedger(js, names)
    work = WorkQueue(
        nc,
        names,
        js=js,
        contexts=contexts,
        traces=traces,
        ledger=ledger,
        ack_wait_s=settings.work_ack_wait_s,
    )
    return Services(
        nc=nc,
        js=js,
        names=names,
        identity=identity,
        lock=lock,
        registry=registry,
        channels=ChannelService(nc, js, names, loader),
        inbox=InboxService(nc, js, names, timeout=settings.op_timeout_s),
        work=work,
        questions=QuestionBook(nc, names, work, js=js),
        presence=presence,
        contexts=contexts,
        threads=Threads(nc, names, contexts),
        leases=LeaseBook(nc, names, js=js),
        traces=traces,
        ledger=ledger,
        workstreams=Workstreams(js, names, identity),
        tree_rate=CreationRate(settings.context_trees_per_minute),
    )
