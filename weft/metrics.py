"""Prometheus metrics (``GET /metrics``), in a registry of their own per app."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from shared.usage.rules import Budget, Totals

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
        self.landings = Counter(
            "weft_landings_total",
            "Items landed (outcome=landed) or sent back by a lander (conflict, gate-failed)",
            ["project", "outcome"],
            registry=self.registry,
        )
        self.landing_batch = Histogram(
            "weft_landing_batch_size",
            "The size of the batch each landing outcome came from (a bisected batch keeps its size)",
            ["project"],
            registry=self.registry,
            buckets=(1, 2, 4, 8, 16, 32, 64),
        )
        self.landing_splits = Histogram(
            "weft_landing_splits",
            "Times the failing batch that held each item was split before its outcome (bisection; 0: none)",
            ["project", "outcome"],
            registry=self.registry,
            buckets=(0, 1, 2, 3, 4, 5, 6),
        )
        self.landing_gate = Histogram(
            "weft_landing_gate_seconds",
            "The landing gate's last run for each item landed or failed",
            ["project", "outcome"],
            registry=self.registry,
            buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600),
        )
        self.notifications = Counter(
            "weft_notifications_total",
            "Notices handled per sink: sent, failed (the sink is recorded as failing), duplicate "
            "(sent already within the dedupe window), rate_limited, dropped (the sink too far behind)",
            ["project", "sink", "outcome"],
            registry=self.registry,
        )
        self.notification_latency = Histogram(
            "weft_notification_seconds",
            "From the event to the sink's answer, for each notice sent",
            ["project"],
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.bottlenecks = Gauge(
            "weft_bottlenecks",
            "Open items holding up at least the policy's bottleneck_dependents open items",
            ["project"],
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
        usage_labels = ["project", "agent", "target", "model"]
        self.usage_tokens = Gauge(
            "weft_usage_tokens",
            "Tokens reported on the work records Weft keeps, by direction (input, output)",
            [*usage_labels, "direction"],
            registry=self.registry,
        )
        self.usage_cost = Gauge(
            "weft_usage_cost",
            "Cost (the project's currency unit) reported on the work records Weft keeps",
            usage_labels,
            registry=self.registry,
        )
        self.usage_today_tokens = Gauge(
            "weft_usage_today_tokens",
            "Tokens (input plus output) counted for the project on the current UTC day",
            ["project"],
            registry=self.registry,
        )
        self.usage_today_cost = Gauge(
            "weft_usage_today_cost",
            "Cost counted for the project on the current UTC day",
            ["project"],
            registry=self.registry,
        )
        self.budget_daily_cost = Gauge(
            "weft_budget_daily_cost",
            "The project's daily cost budget (absent: none)",
            ["project"],
            registry=self.registry,
        )
        self.budget_daily_tokens = Gauge(
            "weft_budget_daily_tokens",
            "The project's daily token budget (absent: none)",
            ["project"],
            registry=self.registry,
        )
        self.budget_hold = Gauge(
            "weft_budget_hold",
            "1 while the project's daily budget is reached (no new claims or spin-ups), else 0",
            ["project"],
            registry=self.registry,
        )
        self.project_paused = Gauge(
            "weft_project_paused",
            "1 while an operator has paused the project (no new claims or spin-ups), else 0",
            ["project"],
            registry=self.registry,
        )
        self.websockets = Gauge(
            "weft_websocket_clients", "Connected WebSocket clients", registry=self.registry
        )

    def observe_landing(
        self, project: str, outcome: str, batch: object, gate_s: object, splits: object = None
    ) -> None:
        """One item's landing outcome (from its ``work.landed`` or ``work.landing-failed``
        event): the size of the batch it was built in, the gate's last run, and how many
        times its batch was split first."""
        self.landings.labels(project, outcome).inc()
        if isinstance(splits, int) and splits >= 0:
            self.landing_splits.labels(project, outcome).observe(splits)
        if isinstance(batch, int) and batch > 0:
            self.landing_batch.labels(project).observe(batch)
        if isinstance(gate_s, int | float) and gate_s >= 0:
            self.landing_gate.labels(project, outcome).observe(gate_s)

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

    def set_usage(
        self,
        project: str,
        usage: dict[tuple[str, str, str], Totals],
        *,
        today: Totals,
        budget: Budget | None,
        held: bool,
        paused: bool = False,
    ) -> None:
        """The usage gauges of one project, as of this scrape (label sets gone since dropped)."""
        for gauge in (self.usage_tokens, self.usage_cost):
            for labels in list(gauge._metrics):
                if labels[0] == project and tuple(labels[1:4]) not in usage:
                    gauge.remove(*labels)
        for (agent, target, model), totals in usage.items():
            self.usage_tokens.labels(project, agent, target, model, "input").set(totals.input_tokens)
            self.usage_tokens.labels(project, agent, target, model, "output").set(totals.output_tokens)
            self.usage_cost.labels(project, agent, target, model).set(totals.cost)
        self.usage_today_tokens.labels(project).set(today.tokens)
        self.usage_today_cost.labels(project).set(today.cost)
        for gauge, limit in (
            (self.budget_daily_cost, None if budget is None else budget.cost),
            (self.budget_daily_tokens, None if budget is None else budget.tokens),
        ):
            if limit is None:
                if (project,) in gauge._metrics:
                    gauge.remove(project)
            else:
                gauge.labels(project).set(limit)
        self.budget_hold.labels(project).set(1 if held else 0)
        self.project_paused.labels(project).set(1 if paused else 0)

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
