"""Prometheus metrics (``GET /metrics``), in a registry of their own per app."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_latency = Histogram(
            "weft_http_request_duration_seconds",
            "REST request latency",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.work_transitions = Counter(
            "weft_work_transitions_total",
            "Work item transitions seen on the events stream",
            ["project", "action"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "weft_queue_depth",
            "Work messages waiting or in flight, per capability",
            ["project", "capability"],
            registry=self.registry,
        )
        self.records_deleted = Counter(
            "weft_records_deleted_total",
            "Finished work records (kind=work) and offline agents' entries (kind=agents) deleted "
            "after WEFT_WORK_RETENTION_S / WEFT_AGENT_RETENTION_S",
            ["project", "kind"],
            registry=self.registry,
        )
        self.spinups = Counter(
            "weft_spinups_total",
            "Spin-up events seen on the events stream",
            ["project", "action"],
            registry=self.registry,
        )
        self.agent_events = Counter(
            "weft_agent_events_total",
            "Agent events seen on the events stream",
            ["project", "action"],
            registry=self.registry,
        )
        self.agents = Gauge(
            "weft_agents",
            "Registered agents by effective status",
            ["project", "status"],
            registry=self.registry,
        )
        self.websockets = Gauge(
            "weft_websocket_clients", "Connected WebSocket clients", registry=self.registry
        )

    def observe_event(self, project: str, kind: str, action: str) -> None:
        if kind == "work":
            self.work_transitions.labels(project, action).inc()
        elif kind == "spinup":
            self.spinups.labels(project, action).inc()
        elif kind == "agent":
            self.agent_events.labels(project, action).inc()

    def set_queue_depths(self, project: str, depths: dict[str, int]) -> None:
        for labels in list(self.queue_depth._metrics):
            if labels[0] == project and labels[1] not in depths:
                self.queue_depth.remove(*labels)
        for capability, depth in depths.items():
            self.queue_depth.labels(project, capability).set(depth)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


class RequestTimer:
    """Pure ASGI middleware: one histogram observation per HTTP request, by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def tracking_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.request_latency.labels(
                scope.get("method", ""), template, str(status["code"])
            ).observe(time.perf_counter() - started)
