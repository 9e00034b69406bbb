"""A sub-agent's parent chain, any depth (docs/context.md, Inherited memories).

A sub-agent's id is derived from its parent's id and its type
(:func:`shared.identity.subagent_id`), so a process knows its parent but not its
grandparent. Each sub-agent records ``(parent_id, subagent_type)`` under its own id in the
project's lineage bucket when it starts; a descendant walks those records up. Every link
is checked by deriving the id again, so a record cannot claim a parent it does not have
(writing ``lineage.<me> = victim`` would not make ``subagent_id(victim, type) == me``).
"""

from __future__ import annotations

from nats.js import JetStreamContext
from pydantic import ValidationError

from shared.base import LoomModel
from shared.identity import Identity, subagent_id
from shared.models import AgentId, Token
from shared.names import ProjectNames
from shared.nats.jetstream import create_if_absent, ensure_kv, get_or_none

MAX_DEPTH = 1000
"""Ancestors followed at most: far past any real nesting, there only to bound the round trips
a damaged bucket could cause (a longer chain is cut, not an error). Links cannot loop: each
is checked by derivation, and an id already in the chain ends it."""


class LineageRecord(LoomModel):
    agent_id: AgentId
    parent_id: AgentId
    subagent_type: Token


def checked(record: LineageRecord) -> bool:
    """Whether the record's agent really is a sub-agent of its parent."""
    return subagent_id(record.parent_id, record.subagent_type) == record.agent_id


async def record_lineage(js: JetStreamContext, names: ProjectNames, identity: Identity) -> None:
    """Note this sub-agent's parent (nothing for a top-level agent; kept once written)."""
    if identity.parent_id is None or identity.subagent_type is None:
        return
    kv = await ensure_kv(js, names.lineage_bucket, description="Loom sub-agent parents")
    record = LineageRecord(
        agent_id=identity.agent_id, parent_id=identity.parent_id, subagent_type=identity.subagent_type
    )
    await create_if_absent(kv, identity.agent_id, record.to_json_bytes())


async def ancestors(js: JetStreamContext, names: ProjectNames, identity: Identity) -> tuple[str, ...]:
    """Parent, grandparent, ... (nearest first), as far as checked records reach."""
    if identity.parent_id is None:
        return ()
    chain = [identity.parent_id]
    kv = await ensure_kv(js, names.lineage_bucket, description="Loom sub-agent parents")
    while len(chain) < MAX_DEPTH:
        entry = await get_or_none(kv, chain[-1])
        if entry is None or entry.value is None:
            break
        try:
            record = LineageRecord.model_validate_json(entry.value)
        except ValidationError:
            break
        if record.agent_id != chain[-1] or not checked(record) or record.parent_id in chain:
            break
        chain.append(record.parent_id)
    return tuple(chain)
