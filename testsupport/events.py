"""Reading a project's events stream in tests: what happened to one item, in order."""

from __future__ import annotations

import json

from nats.aio.client import Client as NatsClient

from shared.names import ProjectNames


async def work_actions(nc: NatsClient, names: ProjectNames, work_id: str) -> list[str]:
    """The actions of every event about ``work_id`` stored so far, in stream order."""
    js = nc.jetstream()
    psub = await js.pull_subscribe(names.events_subjects, stream=names.events_stream)
    seen: list[str] = []
    try:
        while True:
            for msg in await psub.fetch(200, timeout=0.5):
                event = json.loads(msg.data)
                if event["subject_id"] == work_id:
                    seen.append(event["action"])
    except Exception:  # nats-py's fetch times out once the stream is read
        pass
    await psub.unsubscribe()
    return seen
