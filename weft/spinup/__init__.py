"""Spin-up mechanisms (DESIGN §6). :func:`default_service` is the one place that
decides which :class:`SpinupService` a Weft started from the command line uses."""

from __future__ import annotations

from weft.settings import WeftSettings
from weft.spinup.base import (
    WAITING_FOR_AGENT,
    NoSpinup,
    SpinupError,
    SpinupRequester,
    SpinupService,
    SpinupUnavailable,
    TargetConfigError,
    TargetTestResult,
)

__all__ = [
    "WAITING_FOR_AGENT",
    "NoSpinup",
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
    from weft.spinup.settings import SpinupSettings
    from weft.spinup.weft_service import ValidatingNoSpinup, WeftSpinup  # here: needs the project layer

    spinup_settings = SpinupSettings()
    if spinup_settings.mode == "none":
        return ValidatingNoSpinup()
    return WeftSpinup(spinup_settings)
