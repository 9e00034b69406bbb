"""Path parameters and small helpers shared by the route modules."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from shared.names import AGENT_ID_RULE, ID_PATTERN, TOKEN_PATTERN, TOKEN_RULE, anchored

HEX32 = anchored(ID_PATTERN)
"""A 32-hex id (``shared.names``), as a path, query or body pattern."""
TOKEN = anchored(TOKEN_PATTERN)
"""One subject token (``shared.names``), as a path, query or body pattern."""

WorkId = Annotated[str, Path(pattern=HEX32, description="Work item id: 32 lowercase hex")]
AgentId = Annotated[str, Path(pattern=HEX32, description=f"Agent id: {AGENT_ID_RULE}")]
TargetRef = Annotated[str, Path(pattern=TOKEN, description=f"Target id or name: {TOKEN_RULE}")]
ChannelName = Annotated[str, Path(pattern=TOKEN, description=f"Channel name: {TOKEN_RULE}")]
