"""A project's work queue for tests and benches, wired the way Warp and Weft wire theirs:
the caller (here) builds the context store, trace log and usage ledger and hands them in."""

from __future__ import annotations

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.context.store import ContextStore
from shared.names import ProjectNames
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.queue import WorkQueue


def work_queue(
    nc: NatsClient,
    names: ProjectNames,
    *,
    js: JetStreamContext | None = None,
    ack_wait_s: float | None = None,
    contexts: ContextStore | None = None,
    traces: TraceLog | None = None,
    ledger: UsageLedger | None = None,
) -> WorkQueue:
    """A queue with its own collaborators, or those given (a test that reads the context
    trees or the ledger passes its own and keeps the reference)."""
    js = js or nc.jetstream()
    return WorkQueue(
        nc,
        names,
        js=js,
        ack_wait_s=ack_wait_s,
        contexts=ContextStore(nc, names, js=js) if contexts is None else contexts,
        traces=TraceLog(nc, names) if traces is None else traces,
        ledger=UsageLedger(js, names) if ledger is None else ledger,
    )
