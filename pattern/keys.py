"""Bucket and key layout.

| scope    | bucket                         | key                                   |
|----------|--------------------------------|---------------------------------------|
| private  | ``loom-<project>-memory``      | ``private.<agent>.<category>.<id>``   |
| team     | ``loom-<project>-memory``      | ``team.<agent>.<category>.<id>``      |
| personal | ``loom-user-<user>-memory``    | ``personal.<agent>.<category>.<id>``  |
| public   | ``loom-public-memory``         | ``public.<agent>.<category>.<id>``    |

``<agent>`` is always the creator. Because scope, creator and category are
key tokens, one agent's memories (``private.<agent>.>``) or one category
(``team.*.decisions.*``) are a subject filter away, and an expiry marker —
which carries no value — still says whose memory expired and of what kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pattern.models import Category, Scope
from shared.names import AGENT_ID_PATTERN, ID_PATTERN, PUBLIC_MEMORY_BUCKET, ProjectNames, user_memory_bucket

_KEY = re.compile(
    rf"(?P<scope>private|team|personal|public)\.(?P<owner>{AGENT_ID_PATTERN})\."
    rf"(?P<category>[a-z]+)\.(?P<id>{ID_PATTERN})"
)
_CATEGORIES = {c.value for c in Category}


@dataclass(frozen=True, slots=True)
class KeyParts:
    scope: Scope
    owner: str
    category: Category
    id: str


def memory_key(scope: Scope, owner: str, category: Category, memory_id: str) -> str:
    return f"{scope.value}.{owner}.{category.value}.{memory_id}"


def parse_key(key: str) -> KeyParts | None:
    """The parts of a memory key, or None for a key Pattern did not write."""
    m = _KEY.fullmatch(key)
    if m is None or m["category"] not in _CATEGORIES:
        return None
    return KeyParts(Scope(m["scope"]), m["owner"], Category(m["category"]), m["id"])


def owner_filter(scope: Scope, owner: str) -> str:
    """Every memory one agent created in one scope."""
    return f"{scope.value}.{owner}.>"


def scope_filter(scope: Scope) -> str:
    return f"{scope.value}.>"


@dataclass(frozen=True)
class BucketNames:
    """The three buckets one agent uses."""

    project: str
    user: str
    public: str

    @classmethod
    def for_identity(cls, project_id: str, user_id: str) -> BucketNames:
        return cls(
            project=ProjectNames(project_id).memory_bucket,
            user=user_memory_bucket(user_id),
            public=PUBLIC_MEMORY_BUCKET,
        )

    def for_scope(self, scope: Scope) -> str:
        if scope is Scope.PERSONAL:
            return self.user
        if scope is Scope.PUBLIC:
            return self.public
        return self.project
