"""Path parameters and small helpers shared by the route modules."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from shared.names import AGENT_ID_RULE, TOKEN_RULE

HEX32 = "^[0-9a-f]{32}$"
TOKEN = "^[a-z0-9][a-z0-9_-]{0,63}$"

WorkId = Annotated[str, Path(pattern=HEX32, description="Work item id: 32 lowercase hex")]
AgentId = Annotated[str, Path(pattern=HEX32, description=f"Agent id: {AGENT_ID_RULE}")]
TargetRef = Annotated[str, Path(pattern=TOKEN, description=f"Target id or name: {TOKEN_RULE}")]
ChannelName = Annotated[str, Path(pattern=TOKEN, description=f"Channel name: {TOKEN_RULE}")]
