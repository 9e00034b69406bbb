"""An OTLP/HTTP trace receiver for tests: a real HTTP server that decodes the protobuf
payloads OpenTelemetry exporters send to ``/v1/traces`` (a collector cannot run here, so the
test runs this stub of its protocol instead)."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from shared.nats.server import free_port

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    attributes: dict[str, str]


@dataclass
class OtlpReceiver:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    """Every payload as received (decompressed): what a collector would store."""

    def traces(self) -> dict[str, list[ReceivedSpan]]:
        out: dict[str, list[ReceivedSpan]] = {}
        for span in self.spans:
            out.setdefault(span.trace_id, []).append(span)
        return out


def _value(any_value: object) -> str:
    kind = any_value.WhichOneof("value")  # type: ignore[attr-defined]
    return str(getattr(any_value, kind)) if kind else ""


def decode(body: bytes, receiver: OtlpReceiver) -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        service = resource.get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                receiver.spans.append(
                    ReceivedSpan(
                        service=service,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        name=span.name,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                    )
                )


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """``async with otlp_receiver() as r:`` then point ``OTEL_EXPORTER_OTLP_ENDPOINT`` at ``r.url``."""
    port = free_port()
    receiver = OtlpReceiver(url=f"http://127.0.0.1:{port}")

    async def traces(request: web.Request) -> web.Response:
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text="only application/x-protobuf")
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        decode(body, receiver)
        receiver.bodies.append(body)
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF)

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield receiver
    finally:
        await runner.cleanup()
