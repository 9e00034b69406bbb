"""The five spin-up mechanisms, by the name a target's ``mechanism`` field uses."""

from __future__ import annotations

from pathlib import Path

from weft.spinup.mechanisms.base import HandleCallback, Launch, Mechanism, MechanismError, ProbeResult
from weft.spinup.mechanisms.github_actions import GithubActionsMechanism
from weft.spinup.mechanisms.kubernetes import KubernetesMechanism
from weft.spinup.mechanisms.local import LocalMechanism
from weft.spinup.mechanisms.ssh import SshMechanism
from weft.spinup.mechanisms.webhook import WebhookMechanism

__all__ = [
    "HandleCallback",
    "Launch",
    "Mechanism",
    "MechanismError",
    "ProbeResult",
    "default_mechanisms",
]


def default_mechanisms(log_root: Path | None = None) -> dict[str, Mechanism]:
    return {
        "local": LocalMechanism(log_root),
        "ssh": SshMechanism(),
        "kubernetes": KubernetesMechanism(),
        "github-actions": GithubActionsMechanism(),
        "webhook": WebhookMechanism(),
    }
