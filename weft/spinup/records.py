"""Reading spin-up operation records (``names.spinups_bucket``) without creating the bucket."""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, NotFoundError

from shared.models import SpinupOperation
from shared.names import ProjectNames

log = logging.getLogger("loom.weft.spinup")


async def read_operations(js: JetStreamContext, names: ProjectNames) -> list[SpinupOperation]:
    try:
        kv = await js.key_value(names.spinups_bucket)
    except (BucketNotFoundError, NotFoundError):
        return []
    watcher = await kv.watchall(ignore_deletes=True)
    operations: list[SpinupOperation] = []
    try:
        async for entry in watcher:
            if entry is None:
                break
            if entry.value:
                try:
                    operations.append(SpinupOperation.model_validate_json(entry.value))
                except ValueError:
                    log.warning("unreadable spin-up record %s in %s", entry.key, names.spinups_bucket)
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
    return operations
