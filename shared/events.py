"""Publishing and following fabric events (docs/weft.md, Events).

Events go through the project's events stream so that a follower that was
down (a restarting Weft) can resume where it left off.
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig

from shared.models import Event, EventKind
from shared.names import ProjectNames
from shared.nats.jetstream import ensure_stream
from shared.trace.tracing import with_trace_headers

EVENTS_MAX_AGE_S = 7 * 24 * 3600
EVENTS_MAX_MSGS = 1_000_000


async def ensure_events_stream(js: JetStreamContext, names: ProjectNames) -> None:
    await ensure_stream(
        js,
        StreamConfig(
            name=names.events_stream,
            subjects=[names.events_subjects],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=EVENTS_MAX_AGE_S,
            max_msgs=EVENTS_MAX_MSGS,
            duplicate_window=120,
        ),
    )


async def publish_event(
    js: JetStreamContext,
    names: ProjectNames,
    kind: EventKind,
    action: str,
    subject_id: str,
    data: dict[str, Any] | None = None,
    *,
    msg_id: str | None = None,
    unacked: NatsClient | None = None,
    traceparent: str | None = None,
) -> Event:
    """Publish one event. ``msg_id`` (default: the event id) lets several
    publishers of the same fact (two Weft replicas deriving one agent event)
    be deduplicated by the stream. With ``unacked`` (the connection), the event goes out
    as a plain publish that the stream stores without answering: for events on a hot
    path, where waiting for the stream's acknowledgement would cost more than the change
    they announce (the events stream is created before any is sent). The event carries the
    trace context (``traceparent``'s, else the current span's) in its headers."""
    event = Event(
        kind=kind,
        action=action,
        project_id=names.project_id,
        subject_id=subject_id,
        data=data or {},
    )
    subject = names.event_subject(kind, action)
    headers = with_trace_headers({"Nats-Msg-Id": msg_id or event.id}, traceparent)
    if unacked is not None:
        await unacked.publish(subject, event.to_json_bytes(), headers=headers)
    else:
        await js.publish(subject, event.to_json_bytes(), headers=headers)
    return event
