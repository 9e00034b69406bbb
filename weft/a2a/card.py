"""Each project's Agent Card: what the fleet can do now, where to call it, how to authenticate.

Skills are the capabilities the project offers: those of its agents that are online (or
busy) and those of its enabled targets, which Weft can start an agent from. Read from the
project's registry and target copies, so the card changes as agents come and go.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

from shared.models import AgentStatus
from weft import __version__
from weft.project.hub import ProjectContext

SECURITY_SCHEME: Final = "bearer"
INPUT_MODES: Final = ("text/plain", "application/json")
OUTPUT_MODES: Final = ("text/plain", "application/json")


def a2a_path(project_id: str) -> str:
    """Where a project's A2A endpoint is, relative to Weft's base URL."""
    return f"/a2a/{project_id}"


@dataclass
class Offer:
    """Who can take work of one capability."""

    agent_types: set[str] = field(default_factory=set)
    online: int = 0
    targets: set[str] = field(default_factory=set)

    def describe(self, capability: str) -> str:
        parts = []
        if self.online:
            types = ", ".join(sorted(self.agent_types))
            parts.append(f"{self.online} agent(s) online ({types})")
        if self.targets:
            parts.append(f"{len(self.targets)} target(s) that can start one")
        return f"Work needing the '{capability}' capability: " + "; ".join(parts) + "."


def offers(project: ProjectContext) -> dict[str, Offer]:
    """Capability -> who offers it, from the registry and target copies (no round trip)."""
    found: dict[str, Offer] = defaultdict(Offer)
    for state in project.agents.states():
        if state.status not in (AgentStatus.ONLINE, AgentStatus.BUSY):
            continue
        for capability in state.entry.capabilities:
            offer = found[capability]
            offer.online += 1
            offer.agent_types.add(state.entry.agent_type)
    for target in project.targets.all():
        if not target.enabled:
            continue
        for capability in target.capabilities:
            found[capability].targets.add(target.name)
            found[capability].agent_types.add(target.agent_type)
    return dict(found)


IDLE_SKILL: Final = AgentSkill(
    id="work",
    name="work",
    description=(
        "No agent is online and no target is registered in this project right now: work "
        "submitted waits in its queue until an agent with its capability registers."
    ),
    tags=["work"],
    input_modes=list(INPUT_MODES),
    output_modes=list(OUTPUT_MODES),
)
"""The one skill of a project with nothing on offer (a card must list at least one)."""


PUBLIC_SKILL: Final = AgentSkill(
    id="work",
    name="work",
    description=(
        "A message becomes a work item for an agent with the capability named in "
        "metadata.capability. The capabilities on offer now are in the extended card "
        "(GetExtendedAgentCard, with a token)."
    ),
    tags=["work"],
    input_modes=list(INPUT_MODES),
    output_modes=list(OUTPUT_MODES),
)
"""The one skill of the public card: what the fleet offers is for token holders only."""


def public_card(project_id: str, *, base_url: str, auth: bool, grpc_port: int | None = None) -> AgentCard:
    """The card anyone may read: where to call, how to authenticate. Behind tokens it names
    no live capability (the extended card does) and needs no read of the project."""
    return _card(project_id, base_url=base_url, auth=auth, skills=[PUBLIC_SKILL], grpc_port=grpc_port)


async def agent_card(
    project: ProjectContext, *, base_url: str, auth: bool, grpc_port: int | None = None
) -> AgentCard:
    """The card with the skills on offer now: the extended card, and the public one when
    Weft asks for no token. Read from the project's registry and target copies, brought up
    to date first (an agent that registered a moment ago is on offer)."""
    await project.agents.mirror.sync()
    await project.targets.mirror.sync()
    skills = [
        AgentSkill(
            id=capability,
            name=capability,
            description=offer.describe(capability),
            tags=sorted({capability, *offer.agent_types}),
            input_modes=list(INPUT_MODES),
            output_modes=list(OUTPUT_MODES),
        )
        for capability, offer in sorted(offers(project).items())
    ]
    skills = skills or [IDLE_SKILL]
    return _card(project.project_id, base_url=base_url, auth=auth, skills=skills, grpc_port=grpc_port)


def _card(
    project_id: str, *, base_url: str, auth: bool, skills: list[AgentSkill], grpc_port: int | None
) -> AgentCard:
    url = base_url.rstrip("/") + a2a_path(project_id)
    card = AgentCard(
        name=f"Loom project {project_id}",
        description=(
            "A Loom fleet of coding agents. A message becomes a work item: routed to an agent "
            "with the capability (metadata.capability), started from a target when none is "
            "online, and followed until it completes. Skills are the capabilities on offer now."
        ),
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
                tenant=project_id,
            ),
            AgentInterface(  # no tenant: a REST client would put it in the path
                url=url,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
            *(
                [
                    AgentInterface(  # no project in a gRPC address: the tenant names it
                        url=f"{urlsplit(base_url).hostname}:{grpc_port}",
                        protocol_binding=TransportProtocol.GRPC.value,
                        protocol_version=PROTOCOL_VERSION_1_0,
                        tenant=project_id,
                    )
                ]
                if grpc_port is not None
                else []
            ),
        ],
        provider=AgentProvider(organization="Loom", url=base_url.rstrip("/")),
        version=__version__,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True),
        default_input_modes=list(INPUT_MODES),
        default_output_modes=list(OUTPUT_MODES),
        skills=skills,
    )
    if auth:
        card.security_schemes[SECURITY_SCHEME].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="One of Weft's API tokens (WEFT_API_TOKENS)"
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={SECURITY_SCHEME: StringList()}))
    return card
