"""The agents of Synadia's Agent Protocol on Weft's NATS account that are not Loom's
(docs/interop.md): coding agents of other hosts, found with the protocol's own caller package.

Loom's own agents serve the protocol too (warp/protocol.py); they are left out here, whatever
their project, since the registry already shows them to their own project and only there.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING

from nats.aio.client import Client as NatsClient
from pydantic import BaseModel, Field

from shared.names import AGENT_PROTOCOL_AGENT

if TYPE_CHECKING:
    from synadia_ai.agents import Agent, Agents

FRESH_S = 2.0
"""A listing this young is served again (a discovery waits for every service's answer)."""
MAX_METADATA = 20
"""Metadata entries shown per agent (the rest are the agent's own business)."""
MAX_TEXT = 200


class ProtocolAgentView(BaseModel):
    """One agent of the protocol, as its micro service describes itself."""

    instance_id: str = Field(description="The micro service instance (its heartbeats carry it)")
    agent: str = Field(description="The agent token: the kind of agent (e.g. claude-code)")
    owner: str
    session_name: str
    description: str
    version: str
    protocol_version: str
    prompt_subject: str = Field(description="Where a caller of the protocol prompts it")
    online: bool | None = Field(
        description="Heard from within its heartbeat interval (None: no heartbeat heard yet)"
    )
    last_heartbeat: datetime | None = None
    metadata: dict[str, str] = Field(description=f"What it registered (up to {MAX_METADATA} entries)")


class ProtocolAgentsOut(BaseModel):
    items: list[ProtocolAgentView]
    discovered_at: float = Field(description="When the account was asked (Unix time)")


def is_loom_agent(agent: Agent) -> bool:
    return agent.agent == AGENT_PROTOCOL_AGENT and "loom_agent_id" in agent.metadata


def _clip(text: str) -> str:
    return text[:MAX_TEXT]


class ProtocolDirectory:
    """Discovery of the protocol's agents over Weft's connection, shared by every request."""

    def __init__(self, nc: NatsClient) -> None:
        self._nc = nc
        self._agents: Agents | None = None
        self._last: ProtocolAgentsOut | None = None
        self._lock = asyncio.Lock()

    async def foreign(self) -> ProtocolAgentsOut:
        async with self._lock:  # one discovery at a time; those who waited get its answer
            if self._last is not None and time.time() - self._last.discovered_at < FRESH_S:
                return self._last
            if self._agents is None:
                # loaded on first use: Weft pays for the protocol's package only when asked
                from synadia_ai.agents import Agents

                self._agents = Agents(nc=self._nc)
            found = await self._agents.discover()
            self._last = ProtocolAgentsOut(
                items=sorted(
                    (self._view(a) for a in found if not is_loom_agent(a)),
                    key=lambda v: (v.agent, v.owner, v.session_name, v.instance_id),
                ),
                discovered_at=time.time(),
            )
            return self._last

    def _view(self, agent: Agent) -> ProtocolAgentView:
        assert self._agents is not None
        live = self._agents.liveness(agent.instance_id)
        metadata = dict(sorted(agent.metadata.items())[:MAX_METADATA])
        return ProtocolAgentView(
            instance_id=agent.instance_id,
            agent=agent.agent,
            owner=agent.owner,
            session_name=agent.session_name,
            description=_clip(agent.description),
            version=_clip(agent.version),
            protocol_version=_clip(agent.protocol_version),
            prompt_subject=agent.prompt_subject,
            online=None if live is None else live.is_online,
            last_heartbeat=None if live is None else live.last_seen,
            metadata={_clip(k): _clip(v) for k, v in metadata.items()},
        )

    async def close(self) -> None:
        if self._agents is not None:
            await self._agents.close()
