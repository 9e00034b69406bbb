"""Reading spin-up operation records (``names.spinups_bucket``) without creating the bucket."""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, NotFoundError

from shared.jsutil import snapshot
from shared.models import SpinupOperation
from shared.names import ProjectNames

log = logging.getLogger("loom.weft.spinup")


async def read_operations(js: JetStreamContext, names: ProjectNames) -> list[SpinupOperation]:
    try:
        kv = await js.key_value(names.spinups_bucket)
    except (BucketNotFoundError, NotFoundError):
        return []
    operations: list[SpinupOperation] = []
    # One complete pass: nats-py's end-of-values marker can arrive before the values.
    for key, raw in (await snapshot(kv)).items():
        try:
            operations.append(SpinupOperation.model_validate_json(raw))
        except ValueError:
            log.warning("unreadable spin-up record %s in %s", key, names.spinups_bucket)
    return operations
