"""What every spin-up mechanism offers: start, stop, a health probe.

A mechanism is stateless apart from caches: everything it needs to stop an
agent again is in the ``handle`` it returns (pid, remote pid, Job name, run
id), which the manager stores durably with the operation, so another Weft
replica or a restarted Weft can stop what this one started.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from shared.errors import Unavailable
from shared.identity import spun_up_handle
from shared.nats.auth import CREDS_CONTENT
from shared.redact import redact, register_secret
from weft.spinup.config import MechanismConfig

HandleCallback = Callable[[dict[str, str]], Awaitable[None]]
"""Called by ``start`` as soon as the handle is known, before any start-up checks,
so an agent that registers quickly (or a Weft that dies mid-start) leaves a stoppable record."""


class MechanismError(Unavailable):
    """A start, stop or probe that failed: the host, cluster or service the mechanism
    drives did not do it (retrying, or fixing the target, may help). The message is
    redacted and safe to show; it is recorded on the operation."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True)
class Launch:
    """Everything a spawned agent needs to join the fabric."""

    spinup_id: str
    agent_id: str
    project_id: str
    target_id: str
    target_name: str
    nats_url: str
    work_id: str | None = None
    agent_type: str = "generic"
    capabilities: tuple[str, ...] = ()
    boundaries: tuple[str, ...] = ("default",)
    extra_env: dict[str, str] = field(default_factory=dict)
    nats_creds: str | None = field(default=None, repr=False)
    """Scoped NATS auth: the agent's own creds file (a secret, revoked when the operation
    ends); passed as ``NATS_CREDS_CONTENT``, never stored in the target or the operation."""

    def env(self) -> dict[str, str]:
        """The agent's environment contract (see docs/spinup.md)."""
        env = dict(self.extra_env)
        env.pop(CREDS_CONTENT, None)
        if self.nats_creds is not None:
            env[CREDS_CONTENT] = self.nats_creds
        env.setdefault("LOOM_HANDLE", spun_up_handle(self.target_name, self.agent_id))
        env.update(
            {
                "NATS_URL": self.nats_url,
                "LOOM_PROJECT_ID": self.project_id,
                "LOOM_TARGET_ID": self.target_id,
                "LOOM_SPINUP_ID": self.spinup_id,
                "LOOM_WORK_ID": self.work_id or "",
                "LOOM_AGENT_ID": self.agent_id,
                "LOOM_AGENT_TYPE": self.agent_type,
                "LOOM_CAPABILITIES": ",".join(self.capabilities),
                "LOOM_BOUNDARIES": ",".join(self.boundaries),
                "LOOM_AUTO_REGISTER": "1",
            }
        )
        return env

    def template_values(self) -> dict[str, str]:
        return {
            "work_id": self.work_id or "",
            "target_id": self.target_id,
            "target_name": self.target_name,
            "agent_id": self.agent_id,
            "project_id": self.project_id,
            "spinup_id": self.spinup_id,
        }

    def render(self, template: str) -> str:
        """Replace ``{work_id}``-style placeholders (and nothing else: JSON braces stay)."""
        out = template
        for key, value in self.template_values().items():
            out = out.replace("{" + key + "}", value)
        return out


@dataclass
class ProbeResult:
    ok: bool
    detail: str
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": redact(self.detail), "duration_ms": round(self.duration_ms, 2)}


class Mechanism(ABC):
    """One way of starting agents. Each subclass declares, once, the name a target's
    ``mechanism`` field uses and the model of its ``config`` (see the registry in
    :mod:`weft.spinup.mechanisms`)."""

    name: ClassVar[str]
    config_model: ClassVar[type[MechanismConfig]]
    alive_check_interval_s: ClassVar[float] = 15.0
    """How often a started-but-unregistered agent is checked with :meth:`alive` (an API call
    for remote mechanisms; a local process is cheap to look at)."""

    @abstractmethod
    async def start(self, config: Any, launch: Launch, on_handle: HandleCallback) -> dict[str, str]:
        """Start the agent; returns the handle (also given to ``on_handle`` as soon as known)."""

    @abstractmethod
    async def stop(self, config: Any, handle: dict[str, str]) -> str:
        """Stop what ``start`` started (idempotent: stopping something gone is fine); returns a note."""

    @abstractmethod
    async def probe(self, config: Any, timeout_s: float) -> ProbeResult:
        """Can this target start agents right now?"""

    async def alive(self, config: Any, handle: dict[str, str]) -> bool | None:
        """Is the started thing still there? None when the mechanism cannot tell."""
        return None

    @classmethod
    def create(cls, log_root: Path | None = None) -> Mechanism:
        """The instance a Weft uses (``log_root``: where local agents' output goes)."""
        return cls()


def url_has_credentials(url: str) -> bool:
    """Does any server of a (comma-separated) NATS URL carry a user, password or token?"""
    return any(urlsplit(part.strip()).username is not None for part in url.split(",") if part.strip())


def secret_from_env(variable: str, setting: str) -> str:
    """Read a secret named by a target setting; registered so it is masked everywhere."""
    value = os.environ.get(variable)
    if not value:
        raise MechanismError(f"config.{setting}: environment variable {variable} is not set in Weft")
    register_secret(value)
    return value


class Stopwatch:
    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self._start) * 1000
