"""What the standard ``OTEL_*`` variables ask of tracing, read without loading the SDK (a
CLI decides with it whether to load it at all; docs/operations.md, Traces)."""

from __future__ import annotations

import os
from collections.abc import Mapping


def exporting(env: Mapping[str, str] | None = None) -> bool:
    """Whether the variables ask for spans to be exported over OTLP: an endpoint, or
    ``OTEL_TRACES_EXPORTER=otlp``; ``OTEL_TRACES_EXPORTER=none`` says no."""
    env = os.environ if env is None else env
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if "none" in exporters or disabled(env):
        return False
    return "otlp" in exporters or any(
        env.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def disabled(env: Mapping[str, str] | None = None) -> bool:
    """``OTEL_SDK_DISABLED=true``: no tracer provider, no span recorded anywhere."""
    env = os.environ if env is None else env
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
