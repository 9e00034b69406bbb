"""API tokens and their scopes (``WEFT_API_TOKENS``), as pure functions.

Each token carries one scope; each scope includes the ones below it:

* ``read``: every ``GET``, the WebSocket, the API docs when they need a token;
* ``operate``: submit, cancel and retry work, retry and discard dead letters (and the
  answers of the work routes that act on items);
* ``admin``: targets (which decide what command runs where) and manual spin-up, agent
  shutdown, minting NATS credentials for agents, the boundary policy.

``WEFT_API_TOKENS`` is comma-separated; an entry is ``<scope>:<token>``, or a bare
``<token>``, which is ``admin`` (what every token could do before scopes existed).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import IntEnum

from pydantic import SecretStr


class ApiScope(IntEnum):
    """Ordered: a token may do what its scope and every lower scope allows."""

    READ = 1
    OPERATE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


SCOPE_NAMES = tuple(scope.label for scope in ApiScope)
TOKENS_RULE = "comma-separated entries, each <token> (admin) or <scope>:<token> with scope " + ", ".join(
    SCOPE_NAMES
)


@dataclass(frozen=True)
class ApiToken:
    scope: ApiScope
    secret: SecretStr

    def matches(self, candidate: bytes) -> bool:
        return hmac.compare_digest(candidate, self.secret.get_secret_value().encode())


def parse_api_tokens(raw: str) -> list[ApiToken]:
    """Parse ``WEFT_API_TOKENS``; a ``ValueError`` names the variable and the rule, never a token."""
    tokens: list[ApiToken] = []
    for part in raw.split(","):
        entry = part.strip()
        if not entry:
            continue
        scope = ApiScope.ADMIN
        if ":" in entry:
            name, _, entry = entry.partition(":")
            if name.strip().lower() not in SCOPE_NAMES:
                raise ValueError(f"WEFT_API_TOKENS: must be {TOKENS_RULE}")
            scope = ApiScope[name.strip().upper()]
            entry = entry.strip()
        if not entry:
            raise ValueError(f"WEFT_API_TOKENS: must be {TOKENS_RULE} (an entry has an empty token)")
        tokens.append(ApiToken(scope=scope, secret=SecretStr(entry)))
    return tokens


def scope_of(tokens: list[ApiToken], given: str | None) -> ApiScope | None:
    """The scope of ``given`` (None: not a token), compared in constant time against every
    configured token (no early exit). Without configured tokens everything is allowed."""
    if not tokens:
        return ApiScope.ADMIN
    if not given:
        return None
    candidate = given.encode()
    found: ApiScope | None = None
    for token in tokens:
        if token.matches(candidate) and (found is None or token.scope > found):
            found = token.scope
    return found


def missing_scope_message(needed: ApiScope, held: ApiScope) -> str:
    """The 403 message (after the field, ``scope: ``): what the route needs, what the token has."""
    also = " or admin:<token>" if needed is not ApiScope.ADMIN else ""
    return (
        f"this needs a token with the {needed.label} scope and the one given has {held.label} "
        f"(ask whoever runs Weft for one: they add it as {needed.label}:<token>{also} in WEFT_API_TOKENS)"
    )
