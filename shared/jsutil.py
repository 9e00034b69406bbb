"""Idempotent creation of the streams and buckets Loom needs.

Every part may be the first to touch a project, so each ensures what it uses;
these helpers make "create or keep" a single call with the same semantics
everywhere. Replicas come from ``LOOM_JS_REPLICAS`` (3 on a cluster).
"""

from __future__ import annotations

import asyncio
import os
import random

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import (
    APIError,
    BadRequestError,
    BucketNotFoundError,
    InvalidKeyError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NotFoundError,
)
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from shared.names import kv_stream, kv_subject


def default_replicas() -> int:
    raw = os.environ.get("LOOM_JS_REPLICAS", "1")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("LOOM_JS_REPLICAS: must be an integer from 1 to 5") from None
    if not 1 <= value <= 5:
        raise ValueError("LOOM_JS_REPLICAS: must be an integer from 1 to 5")
    return value


async def ensure_kv(
    js: JetStreamContext,
    bucket: str,
    *,
    history: int = 1,
    replicas: int | None = None,
    ttl: float | None = None,
    description: str | None = None,
) -> KeyValue:
    """Bind to ``bucket``, creating it on first use."""
    try:
        return await js.key_value(bucket)
    except (BucketNotFoundError, NotFoundError):
        pass
    config = KeyValueConfig(
        bucket=bucket,
        history=history,
        replicas=replicas or default_replicas(),
        storage=StorageType.FILE,
        ttl=ttl,
        description=description,
        direct=True,
    )
    try:
        return await js.create_key_value(config)
    except BadRequestError:
        # Another process created it between our lookup and create.
        return await js.key_value(bucket)


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    """Create the stream, or update it when it exists (limits may have changed).

    A new stream gets ``config.num_replicas`` or ``LOOM_JS_REPLICAS``. An
    existing one keeps its replica count unless the caller set one explicitly,
    so a process started without the cluster's setting cannot shrink it.
    """
    if not config.name:
        raise ValueError("stream config: name is required")
    explicit_replicas = config.num_replicas
    try:
        current = await js.stream_info(config.name)
    except NotFoundError:
        config.num_replicas = explicit_replicas or default_replicas()
        try:
            await js.add_stream(config)
            return
        except BadRequestError:  # created by another process since we looked
            current = await js.stream_info(config.name)
    config.num_replicas = explicit_replicas or current.config.num_replicas
    await js.update_stream(config)


CAS_RETRIES = 60


async def cas_backoff(attempt: int) -> None:
    """Sleep before retrying a lost compare-and-set: jittered and growing, so
    many writers racing on one key spread out instead of colliding forever."""
    await asyncio.sleep(random.uniform(0, 0.001 * (2 ** min(attempt, 7))))


SNAPSHOT_TIMEOUT_S = 10.0
ONE_SHOT_INACTIVE_S = 5.0
"""A one-shot listing's consumer goes away this soon after it is done (the server caps consumers)."""


WRONG_LAST_SEQUENCE = frozenset({10071, 10164})
"""JetStream error codes of a revision-checked write that lost (wrong last sequence)."""


async def get_or_none(kv: KeyValue, key: str) -> KeyValue.Entry | None:
    """The key's live entry, or None when there is none: never written, deleted or
    purged (nats-py: ``KeyNotFoundError``, also for a delete marker), or a key nats-py
    refuses to look up at all (``InvalidKeyError``: empty, a space, a wildcard, a
    leading or trailing '.', a character outside ``[-/_=.a-zA-Z0-9]``)."""
    try:
        entry = await kv.get(key)
    except (KeyNotFoundError, InvalidKeyError):
        return None
    return entry if entry.value else None


async def create_if_absent(kv: KeyValue, key: str, value: bytes) -> bool:
    """Write ``key`` only if it holds no value now (never written or deleted); False
    if it does. nats-py's ``create`` reports a live key as ``KeyWrongLastSequenceError``
    (JetStream err_code 10071), also when another writer won a race to re-create a
    deleted one; a malformed key is an ``InvalidKeyError`` and is raised."""
    try:
        await kv.create(key, value)
    except KeyWrongLastSequenceError:
        return False
    return True


async def delete_unchanged(kv: KeyValue, key: str, revision: int) -> bool:
    """Delete ``key`` only if it is still at ``revision``; False if it changed meanwhile.

    Leaves a delete marker, so that every watcher sees the key go."""
    try:
        await kv.delete(key, last=revision)
    except APIError as exc:  # nats-py's delete does not map this one, unlike update
        if exc.err_code in WRONG_LAST_SEQUENCE:
            return False
        raise
    return True


async def drop_delete_marker(js: JetStreamContext, bucket: str, key: str) -> None:
    """Remove what a deleted key left in its bucket's stream (the delete marker)."""
    await js.purge_stream(kv_stream(bucket), subject=kv_subject(bucket, key))


async def newest_stored_seq(js: JetStreamContext, bucket: str, keys: str = ">") -> int:
    """Stream sequence of the newest message still stored under ``keys`` (0: none).

    Not the stream's last sequence, which may name a message that is gone (retention
    purges delete markers): a watcher can only ever reach what is still stored."""
    try:
        newest = await js.get_last_msg(kv_stream(bucket), kv_subject(bucket, keys))
    except NotFoundError:
        return 0
    return int(newest.seq or 0)


async def snapshot(kv: KeyValue) -> dict[str, bytes]:
    """Every live key's current value, read in one pass (no per-key get).

    nats-py's watcher may hand out its "initial values done" marker (None)
    *before* the values when the server delivered them all before the client
    asked for consumer info, so the marker cannot end the read. Instead we
    read deletes too and stop at the entry after which nothing is pending.
    """
    if not (await kv.status()).values:
        return {}
    return await _read_all(await kv.watchall())


async def snapshot_keys(js: JetStreamContext, kv: KeyValue, bucket: str, keys: str) -> dict[str, bytes]:
    """:func:`snapshot` of the keys matching ``keys`` (a key pattern such as ``op.*``)."""
    info = await js.stream_info(kv_stream(bucket), subjects_filter=kv_subject(bucket, keys))
    if not info.state.subjects:  # nothing stored under the pattern, not even a delete marker
        return {}
    return await _read_all(await kv.watch(keys, inactive_threshold=ONE_SHOT_INACTIVE_S))


async def _read_all(watcher: KeyValue.KeyWatcher) -> dict[str, bytes]:
    values: dict[str, bytes] = {}
    try:
        while True:
            update = await watcher.updates(timeout=SNAPSHOT_TIMEOUT_S)  # type: ignore[no-untyped-call]
            if update is None:
                continue
            if update.operation in (KV_DEL, KV_PURGE) or not update.value:
                values.pop(update.key, None)
            else:
                values[update.key] = update.value
            if not update.delta:
                return values
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
