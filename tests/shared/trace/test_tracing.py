"""Tracing's rules (which variables export, which spans are recorded, context on the wire,
what a kept span holds) and the timeline kept on a real nats-server (docs/operations.md, Traces)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest
from nats.aio.client import Client as NatsClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from shared.errors import Invalid
from shared.names import ProjectNames
from shared.trace import tracing
from shared.trace.env import disabled, exporting
from shared.trace.timeline import SpanRecord, waterfall
from shared.trace.tracing import WORK_ID, TraceLog, WorkSampler, read_timeline, timed

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def _tp(flags: str = "01") -> str:
    return f"00-{TRACE}-{PARENT}-{flags}"


# -- which variables export -------------------------------------------------------
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
    ],
)
def test_exporting_follows_the_standard_variables(env: dict[str, str], expected: bool) -> None:
    assert exporting(env) is expected


def test_disabled_only_by_true() -> None:
    assert (
        disabled({"OTEL_SDK_DISABLED": "TRUE"})
        and not disabled({"OTEL_SDK_DISABLED": "1"})
        and not disabled({})
    )


def _configured_in_a_process(**env: str) -> subprocess.CompletedProcess[str]:
    """``configure`` in a fresh process (it installs the process's one provider)."""
    code = (
        "from opentelemetry import trace; from shared.trace import tracing; t = tracing.configure('loom-x'); "
        "print(t.provider is None, t.exporting, type(trace.get_tracer_provider()).__name__)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def test_configure_off_default_and_exporting_in_real_processes() -> None:
    off = _configured_in_a_process(OTEL_SDK_DISABLED="true").stdout.split()
    assert off == ["True", "False", "ProxyTracerProvider"]
    assert _configured_in_a_process().stdout.split() == ["False", "False", "TracerProvider"]
    grpc = _configured_in_a_process(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL="grpc"
    )
    assert grpc.stdout.split() == ["False", "True", "TracerProvider"]
    assert "OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported" in grpc.stderr


# -- which spans are recorded -------------------------------------------------------
def _parent(sampled: bool) -> object:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    span = NonRecordingSpan(SpanContext(int(TRACE, 16), int(PARENT, 16), is_remote=True, trace_flags=flags))
    return trace.set_span_in_context(span)


@pytest.mark.parametrize(
    ("everything", "attributes", "parent_sampled", "recorded"),
    [
        (False, {WORK_ID: "w"}, None, True),  # a work span: always, even under an unsampled parent
        (False, {WORK_ID: "w"}, False, True),
        (False, {"http.route": "/x"}, None, False),  # anything else: only when exporting
        (True, {"http.route": "/x"}, None, True),
        (True, {"http.route": "/x"}, True, True),
        (True, {"http.route": "/x"}, False, False),  # the caller sampled it out
    ],
)
def test_work_sampler(
    everything: bool, attributes: dict[str, str], parent_sampled: bool | None, recorded: bool
) -> None:
    sampler = WorkSampler(everything=everything)
    context = None if parent_sampled is None else _parent(parent_sampled)
    result = sampler.should_sample(context, int(TRACE, 16), "span", attributes=attributes)  # type: ignore[arg-type]
    assert (result.decision is Decision.RECORD_AND_SAMPLE) is recorded
    if recorded:
        assert dict(result.attributes or {}) == attributes  # the span keeps its attributes


# -- context on the wire ------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, "", "garbage", f"00-{'0' * 32}-{PARENT}-01", f"00-{TRACE}-zz-01"])
def test_a_missing_or_malformed_traceparent_names_no_context(bad: str | None) -> None:
    assert tracing.context_of(bad) is None and tracing.trace_id_of(bad) is None


def test_traceparent_round_trip_and_headers() -> None:
    assert tracing.trace_id_of(_tp()) == TRACE
    assert tracing.traceparent_of(tracing.context_of(_tp())) == _tp()
    headers = tracing.with_trace_headers({"Nats-Msg-Id": "m"}, _tp())
    assert headers["Nats-Msg-Id"] == "m" and headers["traceparent"] == _tp()
    assert tracing.context_from_headers(headers) is not None
    assert tracing.context_from_headers({"Nats-Msg-Id": "m"}) is None
    assert "traceparent" not in tracing.with_trace_headers({"a": "b"})  # no current span, none given


# -- what a kept span holds -------------------------------------------------------------
def test_a_kept_span_keeps_ours_and_drops_what_could_carry_input() -> None:
    provider = TracerProvider(sampler=WorkSampler(everything=False))
    with provider.get_tracer("t").start_as_current_span(
        "s", attributes={WORK_ID: "w", "loom.x": 1, "url.query": "token=secret", "http.route": "/r"}
    ) as span:
        pass
    record = tracing.record_of(span)  # type: ignore[arg-type]
    assert record is not None and record.attributes == {WORK_ID: "w", "loom.x": 1, "http.route": "/r"}
    assert record.trace_id == format(span.get_span_context().trace_id, "032x") and record.status == "ok"


async def _timeline(nc: NatsClient, project_id: str) -> tuple[ProjectNames, TraceLog]:
    """The project's traces stream, and a trace log publishing to it."""
    names = ProjectNames(project_id)
    await tracing.ensure_traces_stream(nc.jetstream(), names)
    return names, TraceLog(nc, names)


async def test_timed_failures_keep_our_message_and_only_the_type_of_others(
    nc: NatsClient, project_id: str
) -> None:
    names, log = await _timeline(nc, project_id)
    work_id = uuid.uuid4().hex
    with pytest.raises(Invalid), timed(log, "ours", work_id=work_id):
        raise Invalid("percent: must be between 0 and 100", field="percent")
    with pytest.raises(RuntimeError), timed(log, "theirs", work_id=work_id):
        raise RuntimeError("password=hunter2")
    with pytest.raises(RuntimeError), timed(log, "refused", work_id="not an id"):
        raise RuntimeError("x")
    await log.flush(stored=True)
    await log.close()
    records, _ = await read_timeline(nc, names, work_id)
    assert [(r.name, r.status, r.error) for r in records] == [
        ("ours", "error", "percent: must be between 0 and 100"),
        ("theirs", "error", "RuntimeError"),
    ]
    assert records[1].attributes["error.type"] == "RuntimeError"
    info = await nc.jetstream().stream_info(names.traces_stream)
    assert info.state.messages == 1  # the refused id was never recorded (nor its subject made)


async def test_the_timeline_on_a_real_server_is_per_item_and_read_whole(
    nc: NatsClient, project_id: str
) -> None:
    names, log = await _timeline(nc, project_id)
    mine, other = uuid.uuid4().hex, uuid.uuid4().hex
    many = tracing.READ_BATCH + 30  # more messages than one read holds
    for index in range(many):
        with log.span(f"step-{index}", work_id=mine, traceparent=_tp()):
            pass
        await log.flush()  # one message each
    with log.span("elsewhere", work_id=other):
        pass
    await log.close()
    for _ in range(100):  # plain publishes: stored a moment after they arrive
        if (await nc.jetstream().stream_info(names.traces_stream)).state.messages == many + 1:
            break
        await asyncio.sleep(0.05)
    spans, truncated = await read_timeline(nc, names, mine)
    assert len(spans) == many and not truncated
    assert {s.trace_id for s in spans} == {TRACE} and {s.parent_id for s in spans} == {PARENT}
    assert [s.start_ns for s in spans] == sorted(s.start_ns for s in spans)
    others, _ = await read_timeline(nc, names, other)
    assert [s.name for s in others] == ["elsewhere"]
    nothing, _ = await read_timeline(nc, ProjectNames(f"{project_id}-x"), mine)  # another project's stream
    assert nothing == []


async def test_spans_wait_briefly_then_go_out_together(nc: NatsClient, project_id: str) -> None:
    names, log = await _timeline(nc, project_id)
    work_id = uuid.uuid4().hex
    for name in ("a", "b", "c"):
        with log.span(name, work_id=work_id):
            pass
    for _ in range(100):
        spans, _ = await read_timeline(nc, names, work_id)
        if spans:
            break
        await asyncio.sleep(0.05)
    assert [s.name for s in spans] == ["a", "b", "c"]
    info = await nc.jetstream().stream_info(names.traces_stream)
    assert info.state.messages == 1  # one message for the three


# -- the waterfall -------------------------------------------------------------------
def _span(span_id: str, parent: str | None, start: int, end: int) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=span_id,
        parent_id=parent,
        name=span_id,
        service="s",
        start_ns=start,
        end_ns=end,
    )


def test_waterfall_is_in_tree_order_with_missing_parents_as_roots() -> None:
    spans = [
        _span("c2", "r", 30, 40),
        _span("r", "gone", 10, 50),  # its parent was not recorded: a root
        _span("c1", "r", 20, 25),
        _span("g", "c1", 21, 22),
        _span("late", None, 60, 70),
    ]
    bars = waterfall(spans)
    assert [(b.span.span_id, b.depth, b.offset_ns) for b in bars] == [
        ("r", 0, 0),
        ("c1", 1, 10),
        ("g", 2, 11),
        ("c2", 1, 20),
        ("late", 0, 50),
    ]
    assert waterfall(spans, origin_ns=0)[0].offset_ns == 10


def test_waterfall_shows_spans_whose_parents_loop() -> None:
    bars = waterfall([_span("a", "b", 1, 2), _span("b", "a", 3, 4), _span("self", "self", 5, 6)])
    assert sorted(b.span.span_id for b in bars) == ["a", "b", "self"]
    assert waterfall([]) == []


def test_phases_follow_the_items_transitions() -> None:
    from datetime import UTC, datetime, timedelta

    from shared.trace.timeline import phases

    t0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    at = lambda s: t0 + timedelta(seconds=s)  # noqa: E731
    transitions = [
        (at(0), "submission"),
        (at(2), "attempt"),
        (at(3), "progress"),  # changes nothing
        (at(5), "question"),
        (at(170), "answer"),  # a person took 165 s
        (at(171), "handed_in"),
        (at(180), "review"),
        (at(181), "result"),
        (at(190), "progress"),  # after the end: ignored
    ]
    got = [(p.name, p.start, p.end, p.seconds) for p in phases(transitions)]
    assert got == [
        ("queued", at(0), at(2), 2.0),
        ("working", at(2), at(5), 3.0),
        ("waiting on the operator", at(5), at(170), 165.0),
        ("working", at(170), at(171), 1.0),
        ("in review", at(171), at(180), 9.0),
        ("queued", at(180), at(181), 1.0),
    ]


def test_an_open_items_last_phase_runs_to_now_and_a_retry_queues_again() -> None:
    from datetime import UTC, datetime, timedelta

    from shared.trace.timeline import phases

    t0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    at = lambda s: t0 + timedelta(seconds=s)  # noqa: E731
    open_item = [(at(0), "submission"), (at(1), "attempt"), (at(4), "failure"), (at(6), "attempt")]
    got = [(p.name, p.seconds) for p in phases(open_item, until=at(10))]
    assert got == [("queued", 1.0), ("working", 3.0), ("queued", 2.0), ("working", 4.0)]
    assert phases(open_item) == phases(open_item)[:3] and len(phases(open_item)) == 3  # no "now": no open end
    assert phases([]) == [] and phases([(at(0), "progress")], until=at(5)) == []
    merged = phases([(at(0), "submission"), (at(1), "retried"), (at(2), "result")])
    assert [(p.name, p.seconds) for p in merged] == [("queued", 2.0)]  # one queued stretch, not two


def test_an_item_submitted_behind_an_unfinished_dependency_starts_blocked() -> None:
    from datetime import UTC, datetime, timedelta

    from shared.trace.timeline import phase_kind, phases

    t0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    at = lambda s: t0 + timedelta(seconds=s)  # noqa: E731
    submitted = phase_kind("submission", {"status": "blocked"})
    assert submitted == "blocked" and phase_kind("submission", {"status": "queued"}) == "submission"
    assert phase_kind("attempt", {"status": "blocked"}) == "attempt"  # only a submission starts blocked
    got = phases([(at(0), submitted), (at(40), "unblocked"), (at(42), "attempt"), (at(50), "result")])
    assert [(p.name, p.seconds) for p in got] == [("blocked", 40.0), ("queued", 2.0), ("working", 8.0)]
