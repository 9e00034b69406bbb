"""Spin-up: starting agents from targets when work waits, and stopping them when idle
(docs/spinup.md). :func:`default_service` is the one place that decides which
:class:`SpinupService` a Weft started from the command line uses."""

from __future__ import annotations

from weft.settings import WeftSettings
from weft.spinup.base import (
    SPINUP_EXTENSION,
    WAITING_FOR_AGENT,
    DisabledSpinup,
    SpinupError,
    SpinupRequester,
    SpinupService,
    SpinupUnavailable,
    TargetConfigError,
    TargetTestResult,
)

__all__ = [
    "SPINUP_EXTENSION",
    "WAITING_FOR_AGENT",
    "DisabledSpinup",
    "SpinupError",
    "SpinupRequester",
    "SpinupService",
    "SpinupUnavailable",
    "TargetConfigError",
    "TargetTestResult",
    "default_service",
]


def default_service(settings: WeftSettings) -> SpinupService:
    """The spin-up service ``create_app`` uses when none is passed in."""
    from weft.spinup.managed import ManagedSpinup  # here: it needs the project layer
    from weft.spinup.settings import SpinupSettings

    spinup_settings = SpinupSettings()
    if spinup_settings.mode == "none":
        return DisabledSpinup()
    if spinup_settings.log_dir is None:  # local agents' output: under Weft's data home
        spinup_settings = spinup_settings.model_copy(
            update={"log_dir": settings.loom.data_home / "spinup-logs"}
        )
    return ManagedSpinup(spinup_settings)
