"""Target health checks: each target's mechanism probe, on the target's own interval.

A probe answers "could this target start an agent right now?" (local: the
command is executable; ssh: connect and run a no-op; kubernetes: the namespace
is reachable and Jobs may be created; webhook: its health URL answers;
github-actions: the workflow exists and the token may dispatch it). Results
are written to the target (``health``, ``health_detail``,
``last_health_check``; the target store publishes ``target.health-checked``)
and ``target.health-changed`` is published when the verdict changes. Automatic
spin-up skips unhealthy targets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from shared.events import publish_event
from shared.models import Target, TargetHealth, utcnow
from shared.redact import redact
from weft.spinup.config import InvalidTargetConfig
from weft.spinup.manager import SpinupManager
from weft.spinup.mechanisms import parse_config
from weft.spinup.mechanisms.base import ProbeResult, Stopwatch
from weft.targets.store import TargetNotFound

log = logging.getLogger("loom.weft.spinup.health")

MAX_PARALLEL_PROBES = 8


@dataclass
class HealthReport:
    target: Target
    result: ProbeResult
    previous: TargetHealth


class HealthMonitor:
    def __init__(self, manager: SpinupManager) -> None:
        self.manager = manager
        self._running: set[str] = set()
        self._limit = asyncio.Semaphore(MAX_PARALLEL_PROBES)

    async def probe(self, target: Target) -> ProbeResult:
        """Run the target's probe within its timeout; never raises."""
        watch = Stopwatch()
        timeout = target.health_check.timeout_s
        try:
            config = parse_config(target.mechanism, target.config)
        except InvalidTargetConfig as exc:
            return ProbeResult(False, f"invalid config: {exc}", watch.ms)
        mechanism = self.manager.mechanisms.get(target.mechanism)
        if mechanism is None:
            return ProbeResult(False, f"mechanism {target.mechanism} is not available in this Weft", watch.ms)
        try:
            return await asyncio.wait_for(mechanism.probe(config, timeout), timeout + 1)
        except TimeoutError:
            return ProbeResult(False, f"the health check did not finish within {timeout:g}s", watch.ms)
        except Exception as exc:
            return ProbeResult(
                False, redact(f"the health check failed: {type(exc).__name__}: {exc}"), watch.ms
            )

    async def check(self, target: Target) -> HealthReport:
        """Probe now, record the verdict on the target and publish events."""
        async with self._limit:
            result = await self.probe(target)
        health = TargetHealth.HEALTHY if result.ok else TargetHealth.UNHEALTHY
        detail = redact(result.detail)
        updated = await self.manager.targets.record(
            target.id, "health-checked", health=health, health_detail=detail, last_health_check=utcnow()
        )
        names = self.manager.names
        data = {
            "target_name": target.name,
            "health": health.value,
            "previous": target.health.value,
            "detail": detail,
            "duration_ms": round(result.duration_ms, 2),
        }
        if health is not target.health:
            try:
                await publish_event(
                    self.manager.context.js, names, "target", "health-changed", target.id, data
                )
            except Exception as exc:
                log.warning("health event for %s not published: %s", target.name, redact(exc))
        return HealthReport(target=updated, result=result, previous=target.health)

    def due(self, targets: Iterable[Target]) -> list[Target]:
        now = utcnow()
        due: list[Target] = []
        for target in targets:
            if not target.enabled or target.id in self._running:
                continue
            last = target.last_health_check
            if last is None or (now - last).total_seconds() >= target.health_check.interval_s:
                due.append(target)
        return due

    async def run_due(self, targets: Iterable[Target]) -> list[HealthReport]:
        """Check every enabled target whose interval has passed (concurrently, bounded)."""
        due = self.due(targets)
        for target in due:
            self._running.add(target.id)

        async def one(target: Target) -> HealthReport | None:
            try:
                return await self.check(target)
            except TargetNotFound:
                return None
            except Exception as exc:
                log.warning("health check of %s failed: %s", target.name, redact(exc))
                return None
            finally:
                self._running.discard(target.id)

        reports = await asyncio.gather(*(one(t) for t in due))
        return [r for r in reports if r is not None]
