"""Who may read and change which memory (docs/pattern.md, Scopes, categories, ordering).

- private: the creator; a sub-agent also reads the private memories of its whole
  parent chain (parent, grandparent, ...: ``ancestors``) except their core memories,
  and never changes them.
- personal: every agent of the same user (the bucket is the user's); only
  top-level agents may change another agent's personal memories.
- team: everyone in the project reads; only the creator changes.
- public: everyone reads; only the creator changes.
- Sub-agents never see core memories other than their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from pattern.keys import KeyParts
from pattern.models import Category, Scope
from shared.identity import Identity


@dataclass(frozen=True)
class Viewer:
    agent_id: str
    parent_id: str | None = None
    ancestors: tuple[str, ...] = ()
    """The parent chain, nearest first (``shared.agents.lineage``); at least the parent."""

    @classmethod
    def of(cls, identity: Identity, ancestors: tuple[str, ...] = ()) -> Viewer:
        chain = ancestors or ((identity.parent_id,) if identity.parent_id else ())
        return cls(agent_id=identity.agent_id, parent_id=identity.parent_id, ancestors=chain)

    @property
    def is_subagent(self) -> bool:
        return self.parent_id is not None

    def inherits_from(self, owner: str) -> bool:
        return owner == self.parent_id or owner in self.ancestors

    def can_read(self, parts: KeyParts) -> bool:
        if parts.owner == self.agent_id:
            return True
        if parts.category is Category.CORE and self.is_subagent:
            return False
        if parts.scope is Scope.PRIVATE:
            return self.inherits_from(parts.owner)
        return True

    def can_modify(self, parts: KeyParts) -> bool:
        if parts.owner == self.agent_id:
            return True
        return parts.scope is Scope.PERSONAL and not self.is_subagent

    def why_not_modify(self, parts: KeyParts) -> str:
        if parts.scope is Scope.PRIVATE and self.inherits_from(parts.owner):
            return "it is a private memory of your parent chain; sub-agents may read it but not change it"
        if parts.scope is Scope.PERSONAL:
            return "sub-agents may only change personal memories they created"
        return f"only its creator (agent {parts.owner}) may change a {parts.scope.value} memory"
