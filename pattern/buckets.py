"""Create or bind the memory buckets.

Buckets allow per-message TTL (``recent`` and ``tasks`` expire on the server)
and keep expiry markers for ``expired_window_s`` so watchers learn about
expiries and the "recently expired" count survives a restart.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.nats.jetstream import ensure_kv

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
    """Bind to a memory bucket, creating it on first use with Pattern's settings
    (:func:`shared.nats.jetstream.ensure_kv`: another creator's bucket is used as it is)."""
    return await ensure_kv(
        js,
        bucket,
        history=1,
        replicas=replicas,
        description=description or None,
        max_value_size=MAX_VALUE_BYTES,
        marker_ttl=marker_ttl_s,
        direct=None,
    )
