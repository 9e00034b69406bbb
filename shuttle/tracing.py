"""Shuttle's part of a trace: when the ``OTEL_*`` variables ask for export, each command is a
span and its requests to Weft carry the trace context on (docs/operations.md, Traces).
Otherwise nothing is loaded: the SDK would cost every command's start-up."""

from __future__ import annotations

from collections.abc import Callable

from shared.trace.env import exporting


def start(command: str) -> Callable[[], None] | None:
    """Open the command's span (current until the returned callable ends it and hands it to
    the exporter), or None when not exporting."""
    if not exporting():
        return None
    from opentelemetry import context, trace
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.trace import SpanKind

    from shared.trace import tracing

    setup = tracing.configure("loom-shuttle")
    HTTPXClientInstrumentor().instrument(tracer_provider=setup.provider)
    span = tracing.tracer().start_span(f"shuttle {command}", kind=SpanKind.CLIENT)
    token = context.attach(trace.set_span_in_context(span))

    def finish() -> None:
        context.detach(token)
        span.end()
        setup.flush()

    return finish
