"""Project, agent, user and handle identity (docs/architecture.md, Identity and isolation).

Identity is derived, not stored: the same host and project path always give
the same agent id, so an agent that restarts finds its inbox and registry entry
again. Every id produced here passes the validators in :mod:`shared.names`.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shared.errors import Invalid, without_value
from shared.legacy import aliases_of
from shared.names import validate_agent_id, validate_handle, validate_project_id
from shared.nats.auth import AgentCredential
from shared.settings import IdentitySettings, first_set

IDENTITY_VARIABLES = ("LOOM_PROJECT_ID", "LOOM_AGENT_ID", "LOOM_PROJECT_PATH", "LOOM_SUBAGENT_TYPE")


class IdentityError(Invalid, ValueError):
    """Bad identity configuration; the message names the variable and the rule."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def project_id_for_path(project_path: Path) -> str:
    """First 16 hex of sha256 of the absolute project path."""
    return _sha(str(project_path.expanduser().resolve()))[:16]


def base_agent_id(hostname: str, project_path: Path) -> str:
    """Stable per (hostname, project path): 32 lowercase hex."""
    return _sha(f"loom-agent\0{hostname}\0{project_path.expanduser().resolve()}")[:32]


def instance_agent_id(base_id: str, instance: int) -> str:
    """Id of the n-th concurrent Warp process in the same folder (instance 0 is the base)."""
    validate_agent_id(base_id)
    if instance == 0:
        return base_id
    return _sha(f"loom-instance\0{base_id}\0{instance}")[:32]


def subagent_id(parent_id: str, subagent_type: str) -> str:
    """A sub-agent's own id, derived from its parent's so it is stable too."""
    validate_agent_id(parent_id, "parent_id")
    return _sha(f"loom-subagent\0{parent_id}\0{subagent_type}")[:32]


def user_id_for(username: str) -> str:
    """``personal`` scope follows the user across projects: 16 hex of the username."""
    return _sha(f"loom-user\0{username}")[:16]


def _username() -> str:
    """The login name; a container user without a passwd entry (Kubernetes ``runAsUser``)
    has none, so fall back to the uid rather than failing to start."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"


def _squeezed(raw: str, most: int) -> str:
    """``raw`` in a handle's alphabet (``[a-z0-9-]``, no ``--``, no edge ``-``), at most
    ``most`` characters; ``agent`` when nothing is left."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    return re.sub(r"-{2,}", "-", cleaned)[:most].strip("-") or "agent"


def default_handle(hostname: str, project_path: Path) -> str:
    """Readable default handle: ``<host>-<folder>`` squeezed into ``[a-z0-9-]{1,64}``."""
    return validate_handle(_squeezed(f"{hostname.split('.')[0]}-{project_path.name}", 64))


def spun_up_handle(target_name: str, agent_id: str) -> str:
    """A started agent's handle: its target's name and the start of its id, so that agents
    started from one target (one host) can be told apart, e.g. in a review's author and
    reviewer."""
    return validate_handle(f"{_squeezed(target_name, 55)}-{agent_id[:8]}")


@dataclass(frozen=True)
class Identity:
    project_id: str
    project_path: Path
    agent_id: str
    base_agent_id: str
    hostname: str
    handle: str
    agent_type: str
    user_id: str
    instance: int = 0
    parent_id: str | None = None
    subagent_type: str | None = None

    @property
    def is_subagent(self) -> bool:
        return self.parent_id is not None

    def with_instance(self, instance: int) -> Identity:
        """The same identity for another concurrent process in the same folder.

        An explicit ``LOOM_AGENT_ID`` and sub-agents are derived from the base,
        so the instance applies before the sub-agent derivation.
        """
        own = instance_agent_id(self.base_agent_id, instance)
        agent_id = subagent_id(own, self.subagent_type) if self.subagent_type else own
        parent = own if self.subagent_type else None
        return Identity(
            project_id=self.project_id,
            project_path=self.project_path,
            agent_id=agent_id,
            base_agent_id=self.base_agent_id,
            hostname=self.hostname,
            handle=self.handle,
            agent_type=self.agent_type,
            user_id=self.user_id,
            instance=instance,
            parent_id=parent,
            subagent_type=self.subagent_type,
        )


_ALIASES = {ours: aliases_of(ours) for ours in IDENTITY_VARIABLES}
"""Our identity variable -> the TypeScript Loom's names for it (to name what was set in errors)."""


def _problem(err: Mapping[str, Any]) -> str:
    """One validation error as ``<VARIABLE>: <rule>``, naming the alias if that is what was set."""
    msg = without_value(str(err.get("msg", "")).removeprefix("Value error, "), err.get("input"))
    loc = err.get("loc") or ()
    variable = str(loc[0]) if loc else ""
    if not variable:
        return msg
    if variable not in msg:
        msg = f"{variable}: {msg}"
    given = first_set((variable, *_ALIASES.get(variable, ())))
    if given and given != variable:
        msg = msg.replace(variable, f"{given} (alias of {variable})", 1)
    return msg


def load_settings() -> IdentitySettings:
    try:
        return IdentitySettings()
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise IdentityError(f"invalid identity configuration: {problems}") from None


def bound_to_credential(settings: IdentitySettings, credential: AgentCredential | None) -> IdentitySettings:
    """Identity settings for a process whose NATS credentials are one agent's: that agent's
    project, id and user, instance 0 (the server lets these credentials act as no other id).

    A variable that names another project or agent, or asks for another instance or a
    sub-agent id, is a start-up error naming it: it could only ever be refused by the server."""
    if credential is None:
        return settings
    source = "its NATS credentials (NATS_CREDS)"
    if settings.project_id and settings.project_id != credential.project_id:
        raise IdentityError(f"LOOM_PROJECT_ID: must be the project of {source}, or unset")
    if settings.agent_id and settings.agent_id != credential.agent_id:
        raise IdentityError(f"LOOM_AGENT_ID: must be the agent id of {source}, or unset")
    if settings.instance:
        raise IdentityError(f"LOOM_INSTANCE: must be unset or 0 with {source}: they are one agent's")
    if settings.subagent_type:
        raise IdentityError(
            f"LOOM_SUBAGENT_TYPE: must be unset with {source}; mint credentials for the sub-agent's own id"
        )
    return settings.model_copy(
        update={
            "project_id": credential.project_id,
            "agent_id": credential.agent_id,
            "instance": 0,
            "user_id": credential.user_id or settings.user_id,
        }
    )


def resolve_identity(
    settings: IdentitySettings | None = None,
    *,
    hostname: str | None = None,
    cwd: Path | None = None,
) -> Identity:
    """Derive this process's identity from settings (env) and the machine."""
    s = settings if settings is not None else load_settings()
    host = hostname or socket.gethostname()
    path = (s.project_path or cwd or Path.cwd()).expanduser().resolve()
    project_id = validate_project_id(s.project_id) if s.project_id else project_id_for_path(path)
    base = s.agent_id or base_agent_id(host, path)
    handle = s.handle or default_handle(host, path)
    user = s.user_id or user_id_for(_username())
    identity = Identity(
        project_id=project_id,
        project_path=path,
        agent_id=base,
        base_agent_id=base,
        hostname=host,
        handle=handle,
        agent_type=s.agent_type,
        user_id=user,
        subagent_type=s.subagent_type,
    )
    return identity.with_instance(s.instance or 0)
