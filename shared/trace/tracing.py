"""Traces: one W3C trace per piece of work, across every process (docs/operations.md, Traces).

Three things live here, shared by Weft, Warp, Pattern and Shuttle:

* **Set-up** (:func:`configure`): the OpenTelemetry SDK's tracer provider for this process.
  Spans are exported over OTLP/HTTP only when the standard ``OTEL_*`` variables ask for it
  (an endpoint, or ``OTEL_TRACES_EXPORTER=otlp``); ``OTEL_SDK_DISABLED=true`` turns the SDK
  off altogether. With no exporter, only spans about a work item are recorded (the
  :class:`WorkSampler`): everything else stays a non-recording span that still carries
  the context on, which is what keeps the overhead small.
* **Context on the wire**: the item's ``traceparent`` is stored on its record when it is
  submitted, and NATS messages (queue messages, events, direct and channel messages) carry
  ``traceparent``/``tracestate`` headers, so every process can join the item's trace.
* **What Weft records** (:class:`TraceLog`): the spans of a work item are also published,
  a few at a time, to the project's traces stream (one subject per item), so an operator
  without a collector still gets the item's timeline (``GET /api/work/{id}/trace``,
  ``shuttle work trace ID``); ``shared/trace/timeline.py`` lays those spans out (pure).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from shared.errors import LoomError
from shared.names import ProjectNames, is_work_id
from shared.nats.jetstream import ensure_stream
from shared.nats.jsapi import direct_get_batch
from shared.trace.env import disabled, exporting
from shared.trace.timeline import SpanRecord

log = logging.getLogger("loom.tracing")

WORK_ID = "loom.work.id"
"""The attribute that makes a span part of a work item's timeline (recorded, and kept by Weft)."""
PROJECT_ID = "loom.project.id"
AGENT_ID = "loom.agent.id"

TRACER_NAME = "loom"
FLUSH_AFTER_S = 0.2
"""How long spans of the timeline wait to be published together (one message per item)."""
READ_BATCH = 256
MAX_TIMELINE_SPANS = 2000
"""Spans one answer holds for an item (a loop that reports progress for hours is cut)."""
KEPT_ATTRIBUTES = ("loom.", "messaging.", "http.", "gen_ai.tool.name", "mcp.method.name", "error.type")

_W3C = TraceContextTextMapPropagator()


# -- set-up -------------------------------------------------------------------
class WorkSampler(Sampler):
    """Record the spans of a work item always; the rest only when exporting (and then as
    their parent decided: a caller that sampled a trace out is respected)."""

    def __init__(self, *, everything: bool) -> None:
        self.everything = everything

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        about_work = attributes is not None and WORK_ID in attributes
        wanted = about_work or (self.everything and (not parent.is_valid or parent.trace_flags.sampled))
        if not wanted:
            return SamplingResult(Decision.DROP, None, parent.trace_state if parent.is_valid else None)
        return SamplingResult(
            Decision.RECORD_AND_SAMPLE, attributes, parent.trace_state if parent.is_valid else None
        )

    def get_description(self) -> str:
        return f"WorkSampler(everything={self.everything})"


@dataclass
class Tracing:
    """This process's tracing, as :func:`configure` set it up."""

    service: str
    provider: TracerProvider | None
    exporting: bool

    def flush(self, timeout_s: float = 5.0) -> None:
        """Hand finished spans to the exporter now (a CLI about to exit)."""
        if self.provider is not None:
            self.provider.force_flush(int(timeout_s * 1000))


_setup: Tracing | None = None
_setup_lock = threading.Lock()


def configure(service: str, env: Mapping[str, str] | None = None) -> Tracing:
    """Install this process's tracer provider once (later calls return the first set-up:
    the SDK allows one global provider, and in-process tests start several parts)."""
    global _setup
    with _setup_lock:
        if _setup is not None:
            return _setup
        env = os.environ if env is None else env
        if disabled(env):
            _setup = Tracing(service, None, False)
            return _setup
        export = exporting(env)
        resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or service})
        provider = TracerProvider(resource=resource, sampler=WorkSampler(everything=export))
        if export:
            protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            if protocol and protocol != "http/protobuf":
                log.warning("OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported; using it")
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _setup = Tracing(service, provider, export)
        return _setup


_TRACER = trace.get_tracer(TRACER_NAME)
"""A proxy until :func:`configure` installs the provider, then the provider's tracer (made
once: the SDK makes a new tracer on every ``get_tracer`` call)."""


def tracer() -> trace.Tracer:
    return _TRACER


# -- context on the wire ----------------------------------------------------------
def traceparent_of(ctx: otel_context.Context | None = None) -> str | None:
    """The W3C ``traceparent`` of the current span (or of ``ctx``), None without a valid one."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=ctx)
    return carrier.get("traceparent")


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """The context a stored ``traceparent`` names, None when there is none (or it is malformed)."""
    return _parsed(traceparent) if traceparent else None


@functools.lru_cache(maxsize=4096)
def _parsed(traceparent: str) -> otel_context.Context | None:
    """Parsed once per item and process: every operation on an item starts from its context
    (a context is immutable: setting a value makes a new one)."""
    ctx = _W3C.extract({"traceparent": traceparent})
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) a ``traceparent`` names, None when there is none."""
    ctx = context_of(traceparent)
    return format(trace.get_current_span(ctx).get_span_context().trace_id, "032x") if ctx else None


def with_trace_headers(
    headers: MutableMapping[str, str] | None = None, traceparent: str | None = None
) -> dict[str, str]:
    """``headers`` plus the trace context: the given ``traceparent`` (an item's own: nothing
    else travels with it), else the current span's (with its baggage)."""
    out = dict(headers or {})
    if context_of(traceparent) is not None:
        out["traceparent"] = str(traceparent)
    else:
        propagate.inject(out)
    return out


def work_of_headers(headers: Mapping[str, str] | None) -> tuple[str, str] | None:
    """The item a received message is about (its id from the W3C baggage, validated) and the
    ``traceparent`` it carries; None when it names no item."""
    if not headers or "baggage" not in headers or "traceparent" not in headers:
        return None
    work_id = baggage.get_baggage(WORK_ID, propagate.extract(dict(headers)))
    return (work_id, headers["traceparent"]) if isinstance(work_id, str) and is_work_id(work_id) else None


def context_from_headers(headers: Mapping[str, str] | None) -> otel_context.Context | None:
    """The trace context a NATS message carries, None when it carries none."""
    if not headers or "traceparent" not in headers:
        return None
    ctx = propagate.extract(dict(headers))
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


# -- the timeline Weft keeps ------------------------------------------------------
TRACES_MAX_AGE_S = 7 * 24 * 3600
TRACES_MAX_MSGS = 200_000
"""A few spans per message. Bounded by count, not bytes: JetStream reserves a stream's
``max_bytes`` up front, which would take storage from every project served."""


async def ensure_traces_stream(js: JetStreamContext, names: ProjectNames) -> None:
    """The project's traces stream: kept as long as its events, bounded in messages (the
    oldest timelines go first)."""
    await ensure_stream(
        js,
        StreamConfig(
            name=names.traces_stream,
            subjects=[names.trace_subjects],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            max_age=TRACES_MAX_AGE_S,
            max_msgs=TRACES_MAX_MSGS,
            allow_direct=True,
        ),
    )


def record_of(span: ReadableSpan) -> SpanRecord | None:
    context = span.context
    if context is None or span.start_time is None or span.end_time is None:
        return None
    attributes = {
        key: value
        for key, value in (span.attributes or {}).items()
        if key.startswith(KEPT_ATTRIBUTES) and isinstance(value, str | int | float | bool)
    }
    failed = span.status.status_code is StatusCode.ERROR
    service = span.resource.attributes.get(SERVICE_NAME) if span.resource is not None else None
    return SpanRecord(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_id=format(span.parent.span_id, "016x") if span.parent is not None else None,
        name=span.name,
        service=str(service or "unknown"),
        kind=span.kind.name.lower(),
        start_ns=span.start_time,
        end_ns=span.end_time,
        status="error" if failed else "ok",
        error=(span.status.description or "error") if failed else None,
        attributes=attributes,
    )


def _start(
    name: str,
    parent: otel_context.Context | None,
    kind: SpanKind,
    attrs: dict[str, Any],
    links: list[Link] | None,
    start_ns: int | None,
) -> trace.Span:
    return tracer().start_span(
        name,
        context=parent,
        kind=kind,
        attributes=attrs,
        links=links,
        start_time=start_ns,
        record_exception=False,  # an exception's text and stack are not for a collector
        set_status_on_exception=False,
    )


class TraceLog:
    """A project's work spans, recorded by the process that made them and published to the
    traces stream a few at a time (a plain publish: telemetry never holds up the work, and
    one that is lost costs a bar in a timeline, nothing else)."""

    def __init__(self, nc: NatsClient, names: ProjectNames) -> None:
        self._nc = nc
        self.names = names
        self._pending: dict[str, list[ReadableSpan]] = {}
        self._flush_task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        *,
        work_id: str | None,
        traceparent: str | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, str | int | float | bool] | None = None,
        start_ns: int | None = None,
        carry_work_id: bool = False,
    ) -> Iterator[trace.Span]:
        """A span of ``work_id``'s timeline, current inside the block: a child of the item's
        stored ``traceparent`` (linked to what was current, e.g. the MCP tool call), or of the
        current span when the item has none yet. Without a ``work_id`` it is an ordinary span
        (exported when exporting, not kept). ``carry_work_id``: messages published inside
        the block also carry the item's id (W3C baggage), so their receivers can record
        their side in its timeline."""
        parent, links, attrs = self._placed(work_id, traceparent, attributes)
        token = None
        if carry_work_id and work_id is not None:
            token = otel_context.attach(baggage.set_baggage(WORK_ID, work_id, context=parent))
            parent = None  # the attached context is the parent now
        try:
            with self._current(_start(name, parent, kind, attrs, links, start_ns)) as span:
                yield span
        finally:
            if token is not None:
                otel_context.detach(token)

    def _placed(
        self, work_id: str | None, traceparent: str | None, attributes: Mapping[str, Any] | None
    ) -> tuple[otel_context.Context | None, list[Link] | None, dict[str, Any]]:
        """A span's parent (the item's stored trace), its link to what is current, its attributes."""
        parent = context_of(traceparent)
        current = trace.get_current_span().get_span_context()
        links = [Link(current)] if parent is not None and current.is_valid else None
        attrs: dict[str, Any] = {PROJECT_ID: self.names.project_id, **(attributes or {})}
        if work_id is not None:
            attrs[WORK_ID] = work_id
        return parent, links, attrs

    def record(
        self,
        name: str,
        *,
        work_id: str,
        traceparent: str | None,
        kind: SpanKind,
        attributes: Mapping[str, Any],
        start_ns: int,
        failure: BaseException | None,
    ) -> None:
        """The span of an operation that already ran, from ``start_ns`` to now, placed as
        :meth:`span` places it: made and ended at once, never current (nothing runs inside
        it), so none of a current span's context switching is paid on every work operation."""
        parent, links, attrs = self._placed(work_id, traceparent, attributes)
        span = _start(name, parent, kind, attrs, links, start_ns)
        if failure is not None:
            mark_failed(span, failure)
        span.end()
        self.keep(span)

    @contextlib.contextmanager
    def _current(self, span: trace.Span) -> Iterator[trace.Span]:
        """``span`` current inside the block; a failure marked on it; ended and kept after."""
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            try:
                yield span
            except BaseException as exc:
                if not isinstance(exc, asyncio.CancelledError | GeneratorExit):
                    mark_failed(span, exc)
                raise
            finally:
                span.end()  # here, so it is kept ended
                self.keep(span)

    def keep(self, span: trace.Span) -> None:
        """Hold a finished span of an item for the next publish (turned into its record then,
        off the path of the operation that made it)."""
        if not isinstance(span, ReadableSpan):
            return  # the SDK is off
        work_id = (span.attributes or {}).get(WORK_ID)
        if not isinstance(work_id, str) or not is_work_id(work_id):
            return
        self._pending.setdefault(work_id, []).append(span)
        if self._flush_task is None or self._flush_task.done():
            with contextlib.suppress(RuntimeError):  # no running loop: kept for the next flush
                self._flush_task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_AFTER_S)
        await self.flush()

    async def flush(self, *, stored: bool = False) -> None:
        """Publish the waiting spans now; ``stored``: and wait until the stream has them (a
        reader of the timeline about to read it)."""
        pending, self._pending = self._pending, {}
        for work_id, spans in pending.items():
            records = [r for r in map(record_of, spans) if r is not None]
            payload = b"\n".join(r.to_json_bytes() for r in records)
            subject = self.names.trace_subject(work_id)
            try:
                if stored:
                    await self._nc.jetstream().publish(subject, payload, stream=self.names.traces_stream)
                else:
                    await self._nc.publish(subject, payload)
            except Exception as exc:  # telemetry: never an error for the work
                log.debug("spans of %s not recorded: %s", work_id, type(exc).__name__)

    async def close(self) -> None:
        task, self._flush_task = self._flush_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()


async def read_timeline(nc: NatsClient, names: ProjectNames, work_id: str) -> tuple[list[SpanRecord], bool]:
    """The spans recorded for ``work_id``, oldest first, and whether there were more than one
    answer holds (:data:`MAX_TIMELINE_SPANS`)."""
    spans: list[SpanRecord] = []
    seq, subject = 1, names.trace_subject(work_id)
    while len(spans) < MAX_TIMELINE_SPANS:
        try:
            batch = await direct_get_batch(
                nc, names.traces_stream, start_seq=seq, batch=READ_BATCH, subject=subject
            )
        except Exception as exc:  # no stream yet (nothing recorded), or it cannot be read now
            log.debug("timeline of %s not read: %s", work_id, type(exc).__name__)
            break
        for stored in batch:
            for line in stored.data.splitlines():
                with contextlib.suppress(ValueError):
                    spans.append(SpanRecord.model_validate_json(line))
        if len(batch) < READ_BATCH:
            break
        seq = batch[-1].seq + 1
    spans.sort(key=lambda s: (s.start_ns, s.end_ns))
    return spans[:MAX_TIMELINE_SPANS], len(spans) > MAX_TIMELINE_SPANS


# -- spans around work operations ------------------------------------------------------
def mark_failed(span: trace.Span, exc: BaseException) -> None:
    """A failed span: the error's type, and its message only when it is one of ours (whose
    messages name the field and the rule, never a rejected value or a secret)."""
    span.set_attribute("error.type", type(exc).__name__)
    message = str(exc) if isinstance(exc, LoomError) else type(exc).__name__
    span.set_status(Status(StatusCode.ERROR, message))


@dataclass
class Timed:
    """What a timed operation learned about its item (its trace, its holder) by its end."""

    traceparent: str | None = None
    attributes: dict[str, str | int | float | bool] | None = None

    def about(self, item: Any) -> None:
        """Take the trace and holder of ``item`` (a :class:`shared.models.WorkItem`)."""
        self.traceparent = getattr(item, "traceparent", None) or self.traceparent
        holder = getattr(item, "assigned_to", None)
        status = getattr(item, "status", None)
        extra = {
            **({AGENT_ID: holder} if holder else {}),
            **({"loom.work.status": str(status)} if status else {}),
        }
        self.attributes = {**(self.attributes or {}), **extra}


def timed(
    log_: TraceLog,
    name: str,
    *,
    work_id: str,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, str | int | float | bool] | None = None,
) -> contextlib.AbstractContextManager[Timed]:
    """Time an operation on ``work_id`` whose trace is known only at its end (the record is
    read inside it): the span is made afterwards, from the operation's start, as a child of
    the item's trace. A failure is recorded with its type and its (safe) message."""
    return _timed(log_, name, work_id, kind, dict(attributes or {}))


@contextlib.contextmanager
def _timed(
    log_: TraceLog, name: str, work_id: str, kind: SpanKind, attributes: dict[str, str | int | float | bool]
) -> Iterator[Timed]:
    outcome, start = Timed(), time.time_ns()
    if not is_work_id(work_id):  # refused input is never recorded or exported
        yield outcome
        return
    failure: BaseException | None = None
    try:
        yield outcome
    except BaseException as exc:
        failure = exc
        raise
    finally:
        if not isinstance(failure, asyncio.CancelledError | GeneratorExit):
            log_.record(
                name,
                work_id=work_id,
                traceparent=outcome.traceparent,
                kind=kind,
                attributes={**attributes, **(outcome.attributes or {})},
                start_ns=start,
                failure=failure,
            )
