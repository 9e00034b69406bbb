"""Idempotent creation of the streams and buckets Loom needs.

Every part may be the first to touch a project, so each ensures what it uses;
these helpers make "create or keep" a single call with the same semantics
everywhere. Replicas are the connection's (:func:`use_replicas`: ``LOOM_JS_REPLICAS``,
read at start-up and passed to :func:`shared.nats.client.connect`; 3 on a cluster).
"""

from __future__ import annotations

import asyncio
import copy
import json
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nats.aio.client import Client as NatsClient
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig, StreamInfo
from nats.js.errors import (
    APIError,
    BucketNotFoundError,
    InvalidKeyError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NotFoundError,
)
from nats.js.kv import KeyValue

from shared.errors import Unavailable
from shared.names import ProjectNames, kv_stream, kv_subject
from shared.nats.watch import KeyChange, KeyWatch
from shared.settings import DEFAULT_REPLICAS

_provisioned: weakref.WeakKeyDictionary[NatsClient, str] = weakref.WeakKeyDictionary()
_replicas: weakref.WeakKeyDictionary[NatsClient, int] = weakref.WeakKeyDictionary()
PLACEMENT_WAIT_S = 30.0
"""How long a create waits for the cluster to have a peer for each replica it asks for."""
PROVISION_TIMEOUT_S = PLACEMENT_WAIT_S + 10.0
"""How long an agent waits for Weft's answer: past Weft's own wait for the cluster's peers,
so the agent hears why (with no Weft at all it hears at once: the request has no responders)."""
NO_PEERS_FOR_PLACEMENT = 10005
"""JetStream's error code for a create whose replicas have too few live peers to go on."""
_Created = TypeVar("_Created")


class ProvisionError(Unavailable):
    """Weft did not create a stream or bucket this (scoped) connection may not create itself."""


class PlacementError(Unavailable):
    """The cluster has too few live peers for a stream's replicas, and had none by the deadline."""


async def _placed(what: str, replicas: int, create: Callable[[], Awaitable[_Created]]) -> _Created:
    """``create()``, asked again while the cluster has too few peers to place its replicas.

    A cluster and the processes that use it often start together (a Kubernetes rollout, a
    machine's boot): the first create of a replicated stream can reach a meta leader that
    has not yet heard from every peer, and the server refuses it rather than waits. So does a
    cluster with a node down for the moment. Once :data:`PLACEMENT_WAIT_S` has passed the
    refusal stands, said plainly."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PLACEMENT_WAIT_S
    pause = 0.1
    while True:
        try:
            return await create()
        except APIError as refused:
            if refused.err_code != NO_PEERS_FOR_PLACEMENT:
                raise
            if loop.time() + pause > deadline:
                raise PlacementError(
                    f"{what}: the NATS cluster has fewer than {replicas} live JetStream peers for "
                    f"its replicas (waited {PLACEMENT_WAIT_S:g} s); start the missing nodes or "
                    "lower LOOM_JS_REPLICAS"
                ) from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


def mark_provisioned(nc: NatsClient, project_id: str) -> None:
    """``nc`` holds an agent's scoped credentials (project ``project_id``): it may not create
    or change streams and buckets, so the helpers below ask Weft to (``loom.<p>.provision``)."""
    _provisioned[nc] = project_id


def connection_of(js: JetStreamContext) -> NatsClient | None:
    """The connection a JetStream context speaks over (nats-py keeps it private)."""
    nc: NatsClient | None = getattr(js, "_nc", None)
    return nc


def provisioned_project(js: JetStreamContext) -> str | None:
    """The project whose Weft creates streams for this connection, or None (it creates its own)."""
    nc = connection_of(js)
    return _provisioned.get(nc) if nc is not None else None


async def _ask_weft(js: JetStreamContext, project: str, kind: str, config: dict[str, Any]) -> None:
    nc: NatsClient = js._nc
    subject = ProjectNames(project).provision_subject
    body = json.dumps({"kind": kind, "config": config}).encode()
    name = config.get("name") or config.get("bucket")
    try:
        reply = await nc.request(subject, body, timeout=PROVISION_TIMEOUT_S)
    except (NoRespondersError, NatsTimeoutError):
        raise ProvisionError(
            f"{name} does not exist and these NATS credentials may not create it: Weft creates it "
            "on request, and no Weft answered (is Weft running for this project?)"
        ) from None
    try:
        answer = json.loads(reply.data)
    except ValueError:
        answer = {}
    if not answer.get("ok"):
        raise ProvisionError(f"Weft did not create {name}: {answer.get('error') or 'no reason given'}")


def _stream_request(config: StreamConfig) -> dict[str, Any]:
    return {k: v for k, v in config.as_dict().items() if v is not None}


def use_replicas(nc: NatsClient, replicas: int) -> None:
    """Streams and buckets created through ``nc`` get ``replicas`` replicas unless the caller
    asks for a number (the process's ``LOOM_JS_REPLICAS``, passed in where it connects)."""
    _replicas[nc] = replicas


def replicas_of(js: JetStreamContext) -> int:
    """How many replicas a stream or bucket created through ``js`` gets by default
    (:func:`use_replicas`; 1 for a connection nobody told)."""
    nc = getattr(js, "_nc", None)
    return _replicas.get(nc, DEFAULT_REPLICAS) if nc is not None else DEFAULT_REPLICAS


async def bucket_exists(js: JetStreamContext, bucket: str) -> bool:
    """Whether ``bucket`` was created (without creating it)."""
    try:
        await js.stream_info(kv_stream(bucket))
    except NotFoundError:
        return False
    return True


async def ensure_kv(
    js: JetStreamContext,
    bucket: str,
    *,
    history: int = 1,
    replicas: int | None = None,
    ttl: float | None = None,
    description: str | None = None,
    max_value_size: int | None = None,
    marker_ttl: float | None = None,
    direct: bool | None = True,
) -> KeyValue:
    """Bind to ``bucket``, creating it on first use (file storage; ``marker_ttl``: how long
    the server keeps the marker of an expired or purged key, for watchers to see it). An
    existing bucket is bound as it is, whatever it was created with.

    A connection that may create buckets asks for the create first, as
    :func:`ensure_stream` does and for the same reason (a bucket just created has no
    leader for a moment); one that may not binds first and asks Weft only for what is
    missing."""
    if provisioned_project(js) is not None:
        try:
            return await js.key_value(bucket)
        except (BucketNotFoundError, NotFoundError):
            pass
    config = KeyValueConfig(
        bucket=bucket,
        history=history,
        replicas=replicas or replicas_of(js),
        storage=StorageType.FILE,
        ttl=ttl,
        description=description,
        max_value_size=max_value_size,
        limit_marker_ttl=marker_ttl,
        direct=direct,
    )
    return await create_kv(js, config)


async def create_kv(js: JetStreamContext, config: KeyValueConfig) -> KeyValue:
    """Create a bucket (through Weft when this connection may not) and bind to it; a bucket
    that exists with another configuration is bound as it is."""
    project = provisioned_project(js)
    if project is not None:
        await _ask_weft(js, project, "kv", kv_request(config))
        return await js.key_value(config.bucket)
    try:
        return await _placed(f"bucket {config.bucket}", config.replicas, lambda: js.create_key_value(config))
    except APIError as refused:  # it exists, created otherwise: bound as it is...
        try:
            return await js.key_value(config.bucket)
        except (BucketNotFoundError, NotFoundError):
            raise refused from None  # ... or it cannot be made as asked


def kv_request(config: KeyValueConfig) -> dict[str, Any]:
    """The fields of a bucket an agent may ask Weft for (:func:`kv_config`'s inverse)."""
    fields = ("bucket", "description", "history", "ttl", "max_value_size", "limit_marker_ttl", "direct")
    return {k: getattr(config, k, None) for k in fields if getattr(config, k, None) is not None}


def kv_config(request: dict[str, Any], *, replicas: int) -> KeyValueConfig:
    """A bucket's config from an agent's request: only the fields in :func:`kv_request`."""
    return KeyValueConfig(
        bucket=str(request["bucket"]),
        description=request.get("description"),
        history=int(request.get("history") or 1),
        ttl=request.get("ttl"),
        max_value_size=request.get("max_value_size"),
        limit_marker_ttl=request.get("limit_marker_ttl"),
        direct=bool(request.get("direct", True)),
        storage=StorageType.FILE,
        replicas=replicas,
    )


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    """Create the stream, or update it when it exists with other limits.

    A new stream gets ``config.num_replicas`` or the connection's (:func:`replicas_of`). An
    existing one keeps its replica count unless the caller set one explicitly,
    so a process started without the cluster's setting cannot shrink it.

    The create is asked first: the server answers it for a stream that exists as asked,
    at once. Asking for the stream's info first stalled a fleet's first start on a
    cluster: a stream another process has just created has no leader for a moment, and
    info requests then go unanswered until they time out (of six processes starting
    together on three nodes, five waited out one or two timeouts). An update is sent only when
    the limits differ: each one is a change the whole cluster agrees on.
    """
    if not config.name:
        raise ValueError("stream config: name is required")
    project = provisioned_project(js)
    if project is not None:  # scoped credentials: Weft creates it (and keeps its limits)
        await _ask_weft(js, project, "stream", _stream_request(config))
        return
    explicit_replicas = config.num_replicas
    config.num_replicas = explicit_replicas or replicas_of(js)
    current = await create_or_keep_stream(js, config)
    if current is None:
        return
    config.num_replicas = explicit_replicas or current.config.num_replicas
    if differs(current.config, config):
        await js.update_stream(config)


async def create_or_keep_stream(js: JetStreamContext, config: StreamConfig) -> StreamInfo | None:
    """Create the stream as ``config`` asks, create first (see :func:`ensure_stream`); None
    when it is so now, else the info of the stream that exists with another configuration,
    left as it is."""
    try:
        await _placed(f"stream {config.name}", config.num_replicas or 1, lambda: js.add_stream(config))
        return None
    except APIError as refused:  # it exists, created otherwise (other limits or replicas)...
        try:
            return await js.stream_info(str(config.name))
        except NotFoundError:
            raise refused from None  # ... or it cannot be made as asked


def differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    """Whether ``wanted`` asks for anything ``current`` does not have (fields it leaves
    unset are the server's to choose, and are not compared)."""
    have = current.as_dict()
    return any(have.get(key) != value for key, value in _stream_request(wanted).items())


SNAPSHOT_TIMEOUT_S = 10.0
ONE_SHOT_INACTIVE_S = 5.0
"""A one-shot listing's consumer goes away this soon after it is done (the server caps consumers)."""


WRONG_LAST_SEQUENCE = frozenset({10071, 10164})
"""JetStream error codes of a revision-checked write that lost (wrong last sequence)."""


async def get_or_none(kv: KeyValue, key: str, *, confirm_absent: bool = False) -> KeyValue.Entry | None:
    """The key's live entry, or None when there is none: never written, deleted or
    purged (nats-py: ``KeyNotFoundError``, also for a delete marker), or a key nats-py
    refuses to look up at all (``InvalidKeyError``: empty, a space, a wildcard, a
    leading or trailing '.', a character outside ``[-/_=.a-zA-Z0-9]``).

    ``confirm_absent``: "None" is asked again of the stream's leader before it is
    believed. Loom's buckets allow direct gets, which any replica answers, and a replica
    that is behind answers "no such key" for one just written. A caller that would drop
    something on "absent" must confirm it: a claim that read a new item's record on a
    lagging replica dropped its queue message, and acknowledged work was lost
    (scenario 31). A present key read stale is harmless to a caller that writes: its
    compare-and-set loses and it reads again; a caller that acts without writing must read
    it through :func:`through_leader` (``WorkRecords``' claims do). Off by default, because the
    leader's read is a JetStream API request (slower, and served by fewer threads than
    direct gets) and most absent keys decide nothing (no budget set, no such sink)."""
    entry = await _entry(kv, key)
    if entry is None and confirm_absent and kv is not (leader := through_leader(kv)):
        entry = await _entry(leader, key)
    return entry


async def _entry(kv: KeyValue, key: str) -> KeyValue.Entry | None:
    try:
        entry = await kv.get(key)
    except (KeyNotFoundError, InvalidKeyError):
        return None
    return entry if entry.value else None


def through_leader(kv: KeyValue) -> KeyValue:
    """``kv`` read through its stream's leader (``STREAM.MSG.GET``) rather than any replica
    (``DIRECT.GET``); ``kv`` itself when it does not use direct gets. nats-py decides
    direct or not per bucket handle, with no public switch, so this is a copy of the
    handle with its flag off (tests/shared/nats/test_kv_helpers.py pins that it reads)."""
    if not getattr(kv, "_direct", False):
        return kv
    view = copy.copy(kv)
    view._direct = False
    return view


async def create_if_absent(kv: KeyValue, key: str, value: bytes) -> bool:
    """Write ``key`` only if it holds no value now (never written or deleted); False
    if it does. nats-py's ``create`` reports a live key as ``KeyWrongLastSequenceError``
    (JetStream err_code 10071), also when another writer won a race to re-create a
    deleted one; a malformed key is an ``InvalidKeyError`` and is raised."""
    return await create_new(kv, key, value) is not None


async def create_new(kv: KeyValue, key: str, value: bytes) -> int | None:
    """:func:`create_if_absent` that returns the new key's revision (None: it holds a value)."""
    try:
        return int(await kv.create(key, value))
    except KeyWrongLastSequenceError:
        return None


async def update_unchanged(kv: KeyValue, key: str, value: bytes, revision: int) -> int | None:
    """Write ``key`` only if it is still at ``revision``: the new revision, or None when
    another writer changed (or deleted) it since (nats-py: ``KeyWrongLastSequenceError``,
    JetStream err_code 10071 or 10164)."""
    try:
        return int(await kv.update(key, value, last=revision))
    except KeyWrongLastSequenceError:
        return None


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


async def publish_unchanged(
    js: JetStreamContext,
    subject: str,
    body: bytes,
    last_seq: int,
    *,
    per_subject: bool = False,
    headers: dict[str, str] | None = None,
    stream: str | None = None,
    msg_ttl: int | None = None,
) -> int | None:
    """Append ``body`` only if the stream's last sequence is still ``last_seq``
    (``Nats-Expected-Last-Sequence``): its sequence, or None when anything was stored
    in the stream since (a compare-and-set over a whole bucket). With ``per_subject``,
    only ``subject``'s last sequence counts (``Nats-Expected-Last-Subject-Sequence``: a
    compare-and-set over one context tree)."""
    check = "Nats-Expected-Last-Subject-Sequence" if per_subject else "Nats-Expected-Last-Sequence"
    try:
        ack = await js.publish(
            subject, body, headers={**(headers or {}), check: str(last_seq)}, stream=stream, msg_ttl=msg_ttl
        )
    except APIError as exc:
        if exc.err_code in WRONG_LAST_SEQUENCE:
            return None
        raise
    return int(ack.seq)


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


async def snapshot(kv: KeyValue, *, where: Callable[[bytes], bool] | None = None) -> dict[str, bytes]:
    """Every live key's current value, read in one pass (no per-key get).

    Read through :class:`shared.nats.watch.KeyWatch`, deletes too, up to the entry after
    which the server has nothing pending. ``where``: a cheap test of a value's bytes; a
    value that fails it is left out before anyone parses it (a reader after a few records
    among many pays for the bytes only).
    """
    status = await kv.status()
    if not status.values:
        return {}
    # nats-py keeps a bound bucket's JetStream context private; the watch needs it. A one-shot
    # read: its consumer must not outlive it by minutes (a sweep reads every few seconds, and
    # the server refuses a stream's 1,001st consumer).
    return await _read_all(kv._js, status.bucket, ">", where)


async def snapshot_keys(js: JetStreamContext, kv: KeyValue, bucket: str, keys: str) -> dict[str, bytes]:
    """:func:`snapshot` of the keys matching ``keys`` (a key pattern such as ``op.*``)."""
    info = await js.stream_info(kv_stream(bucket), subjects_filter=kv_subject(bucket, keys))
    if not info.state.subjects:  # nothing stored under the pattern, not even a delete marker
        return {}
    return await _read_all(js, bucket, keys, None)


async def _read_all(
    js: JetStreamContext, bucket: str, keys: str, where: Callable[[bytes], bool] | None
) -> dict[str, bytes]:
    """The values as the watch hands them over, kept in its callback: no queue and no
    per-message timer, which cost more than the message itself in a bucket of thousands.
    Fails when the server sends nothing for :data:`SNAPSHOT_TIMEOUT_S` before the end."""
    values: dict[str, bytes] = {}
    received = 0

    async def keep(change: KeyChange) -> None:
        nonlocal received
        if watch.loaded.is_set():
            return  # a change after the end: newer than this read
        received += 1
        if change.removed or (where is not None and not where(change.value)):
            values.pop(change.key, None)
        else:
            values[change.key] = change.value

    watch = KeyWatch(js, bucket, keys, on_change=keep, inactive_s=ONE_SHOT_INACTIVE_S)
    await watch.start()
    try:
        while not watch.loaded.is_set():
            before = received
            try:
                await asyncio.wait_for(watch.loaded.wait(), SNAPSHOT_TIMEOUT_S)
            except TimeoutError:
                if received == before:
                    raise NatsTimeoutError from None  # what nats-py's own watch raised here
        return values
    finally:
        await watch.stop()
