"""Create or bind the memory buckets.

Buckets allow per-message TTL (``recent`` and ``tasks`` expire on the server)
and keep expiry markers for ``expired_window_s`` so watchers learn about
expiries and the "recently expired" count survives a restart.
"""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from shared.nats.jetstream import create_kv

log = logging.getLogger("loom.pattern.buckets")

MAX_VALUE_BYTES = 256 * 1024
"""A record holds at most 32 KB of content plus tags and metadata; JSON escaping can grow it."""


async def server_supports_ttl(js: JetStreamContext) -> bool:
    """nats-server 2.11+ (JetStream API level >= 1) has per-message TTL and expiry markers."""
    info = await js.account_info()
    level = getattr(info.api, "level", None)
    return bool(level and level >= 1)


async def ensure_bucket(
    js: JetStreamContext,
    bucket: str,
    *,
    marker_ttl_s: float | None,
    replicas: int = 1,
    description: str = "",
) -> KeyValue:
    """Bind to ``bucket``, creating it on first use (races with another creator are fine)."""
    try:
        return await js.key_value(bucket)
    except (BucketNotFoundError, NotFoundError):
        pass
    config = KeyValueConfig(
        bucket=bucket,
        description=description or None,
        history=1,
        max_value_size=MAX_VALUE_BYTES,
        storage=StorageType.FILE,
        replicas=replicas,
        limit_marker_ttl=marker_ttl_s,
    )
    # Someone else may create it meanwhile (possibly with other settings): then theirs is used.
    kv = await create_kv(js, config)
    log.info("memory bucket %s ready", bucket)
    return kv
