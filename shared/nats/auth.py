"""NATS decentralized auth for Loom: nkeys, JWTs and creds files, in Python.

The server runs in operator mode (see :func:`server_auth_config`): an operator signs two
accounts, ``SYS`` (the server's system account) and ``LOOM`` (every project's streams and
buckets), and whoever holds the ``LOOM`` account's seed (Weft) signs user JWTs. A user JWT
carries the user's permissions (``pub``/``sub`` allow lists, checked by the server on every
message) and an expiry (``exp``, after which the server refuses and disconnects it); the
account JWT lists revoked users, and an updated account JWT pushed to the servers closes
their connections at once.

Why our own encoder: the JWT format is small and stable (base64url JSON header and claims,
an ed25519 signature by the issuer's nkey), ``nkeys`` (a dependency of nats-py's auth
support) does the cryptography, and the one Python library for NATS JWTs on PyPI
(``nats-jwt``) describes itself as not well tested and pins old versions of its own
dependencies. The claim layout follows github.com/nats-io/jwt (v2); the tests check every
JWT made here against a real nats-server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

import nkeys
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from shared.errors import Invalid
from shared.names import AgentAccess
from shared.redact import register_secret
from shared.settings import NatsSettings

OPERATOR: Final = nkeys.PREFIX_BYTE_OPERATOR
ACCOUNT: Final = nkeys.PREFIX_BYTE_ACCOUNT
USER: Final = nkeys.PREFIX_BYTE_USER

NO_LIMIT: Final = -1
MAX_CONTROL_LINE: Final = 32768
"""Bytes a protocol line may have; a client's CONNECT carries its JWT, permissions and all."""
TAG_ROLE: Final = "loom-role"
TAG_PROJECT: Final = "loom-project"
TAG_AGENT: Final = "loom-agent"
TAG_USER: Final = "loom-user"
ROLE_AGENT: Final = "agent"

_CREDS = re.compile(
    r"-----BEGIN NATS USER JWT-----\s*(?P<jwt>[A-Za-z0-9_.=-]+)\s*------END NATS USER JWT------.*?"
    r"-----BEGIN USER NKEY SEED-----\s*(?P<seed>S[A-Z2-7]+)\s*------END USER NKEY SEED------",
    re.S,
)


class CredentialsError(Invalid, ValueError):
    """A creds file or JWT that is not what Loom issues; the message names the field."""


# -- keys ----------------------------------------------------------------------------
def new_seed(prefix: int) -> bytes:
    """A fresh nkey seed (``S...``) for an operator, account or user key."""
    return bytes(nkeys.encode_seed(os.urandom(32), prefix))


def public_key(seed: bytes) -> str:
    """The public key (``O...``, ``A...``, ``U...``) of ``seed``."""
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())


def _sign(seed: bytes, data: bytes) -> bytes:
    return bytes(nkeys.from_seed(bytearray(seed)).sign(data))


def _verify(key: str, data: bytes, signature: bytes) -> None:
    """Check an ed25519 signature against an nkey public key (prefix byte, key, crc16)."""
    raw = base64.b32decode(key.encode())
    if len(raw) != 35 or not nkeys.valid_public_prefix_byte(raw[0]):
        raise ValueError("not an nkey public key")
    VerifyKey(raw[1:33]).verify(data, signature)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- JWTs ------------------------------------------------------------------------------
_HEADER = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}, separators=(",", ":")).encode())


def encode_jwt(claims: dict[str, Any], signer: bytes, *, issued_at: int | None = None) -> str:
    """Sign ``claims`` (``sub``, ``nats`` and any others) with ``signer``'s nkey.

    ``iss``, ``iat`` and ``jti`` (a hash of the claims) are filled in here, as the Go
    library does."""
    body = dict(claims)
    body["iss"] = public_key(signer)
    body["iat"] = int(time.time()) if issued_at is None else issued_at
    body.pop("jti", None)
    digest = hashlib.new("sha512_256", json.dumps(body, sort_keys=True).encode()).digest()
    body["jti"] = base64.b32encode(digest).decode().rstrip("=")
    payload = _b64(json.dumps(body, separators=(",", ":")).encode())
    signed = f"{_HEADER}.{payload}"
    return f"{signed}.{_b64(_sign(signer, signed.encode()))}"


def decode_jwt(token: str) -> dict[str, Any]:
    """The claims of a JWT, checked against its issuer's signature (not its expiry)."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise CredentialsError("is not a JWT (three dot-separated parts)", field="jwt")
    try:
        claims = json.loads(_unb64(parts[1]))
        _verify(str(claims["iss"]), f"{parts[0]}.{parts[1]}".encode(), _unb64(parts[2]))
    except (ValueError, KeyError, TypeError, BadSignatureError) as exc:
        raise CredentialsError(f"is not a valid signed JWT ({type(exc).__name__})", field="jwt") from None
    if not isinstance(claims, dict):
        raise CredentialsError("is not a valid signed JWT (claims are not an object)", field="jwt")
    return claims


STREAMED_REPLIES_MAX = 10_000
"""Messages a scoped agent may send to one request's reply subject (docs/interop.md)."""


@dataclass(frozen=True)
class Permissions:
    """A user's subject permissions; empty allow lists deny everything of that kind."""

    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    allow_responses: bool = False

    @classmethod
    def everything(cls) -> Permissions:
        return cls(publish=(">",), subscribe=(">",))

    @classmethod
    def of(cls, access: AgentAccess) -> Permissions:
        return cls(publish=access.publish, subscribe=access.subscribe, allow_responses=True)

    def claims(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pub": {"allow": list(self.publish)} if self.publish else {"deny": [">"]},
            "sub": {"allow": list(self.subscribe)} if self.subscribe else {"deny": [">"]},
        }
        if self.allow_responses:
            # replies to the requests received, no deadline; a prompt of the agent protocol is
            # answered by a stream (ack, keep-alives, chunks, terminator), not by one message
            out["resp"] = {"max": STREAMED_REPLIES_MAX, "ttl": 0}
        return out


def operator_jwt(operator_seed: bytes, *, name: str, system_account: str) -> str:
    sub = public_key(operator_seed)
    nats = {"type": "operator", "version": 2, "system_account": system_account}
    return encode_jwt({"sub": sub, "name": name, "nats": nats}, operator_seed)


def account_jwt(
    account_seed: bytes,
    operator_seed: bytes,
    *,
    name: str,
    jetstream: bool,
    revocations: dict[str, int] | None = None,
    issued_at: int | None = None,
) -> str:
    """An account's JWT. Users without permissions of their own get none at all
    (``default_permissions`` deny everything); ``revocations`` maps user keys to the time
    before which their JWTs no longer count."""
    limits: dict[str, Any] = {
        "subs": NO_LIMIT,
        "data": NO_LIMIT,
        "payload": NO_LIMIT,
        "imports": NO_LIMIT,
        "exports": NO_LIMIT,
        "wildcards": True,
        "conn": NO_LIMIT,
        "leaf": NO_LIMIT,
    }
    if jetstream:
        limits.update(mem_storage=NO_LIMIT, disk_storage=NO_LIMIT, streams=NO_LIMIT, consumer=NO_LIMIT)
    nats: dict[str, Any] = {
        "type": "account",
        "version": 2,
        "limits": limits,
        "default_permissions": Permissions().claims(),
    }
    if revocations:
        nats["revocations"] = dict(sorted(revocations.items()))
    claims = {"sub": public_key(account_seed), "name": name, "nats": nats}
    return encode_jwt(claims, operator_seed, issued_at=issued_at)


def user_jwt(
    user_key: str,
    account_seed: bytes,
    *,
    name: str,
    permissions: Permissions,
    expires_at: int | None = None,
    tags: dict[str, str] | None = None,
) -> str:
    """A user's JWT, signed by its account. ``expires_at`` (unix seconds): the server refuses
    it afterwards and closes its connections then."""
    nats: dict[str, Any] = {
        "type": "user",
        "version": 2,
        "subs": NO_LIMIT,
        "data": NO_LIMIT,
        "payload": NO_LIMIT,
        **permissions.claims(),
    }
    if tags:
        nats["tags"] = [f"{k}:{v}" for k, v in tags.items()]
    claims: dict[str, Any] = {"sub": user_key, "name": name, "nats": nats}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    return encode_jwt(claims, account_seed)


# -- creds files ---------------------------------------------------------------------
def creds_text(jwt: str, user_seed: bytes) -> str:
    """A creds file (what ``NATS_CREDS`` names and nats-py's ``user_credentials`` reads)."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{user_seed.decode()}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


def parse_creds(text: str) -> tuple[str, bytes]:
    """(user JWT, user seed) from a creds file; the error never repeats the file's content."""
    found = _CREDS.search(text)
    if found is None:
        raise CredentialsError("is not a NATS creds file (user JWT and nkey seed)", field="NATS_CREDS")
    return found.group("jwt"), found.group("seed").encode()


@dataclass(frozen=True)
class AgentCredential:
    """What a Loom agent's credential says about it (from its JWT's tags)."""

    project_id: str
    agent_id: str
    user_id: str | None
    expires_at: int | None


def agent_of(jwt: str) -> AgentCredential | None:
    """The agent a Loom-issued user JWT is for, or None for any other JWT (Weft's own, a
    credential made with other tools). Not a security check: the server enforces the JWT's
    permissions whatever it says here; Warp uses this to take the identity it was given."""
    claims = decode_jwt(jwt)
    tags: dict[str, str] = {}
    for tag in (claims.get("nats") or {}).get("tags") or []:
        key, _, value = str(tag).partition(":")
        tags[key] = value
    if tags.get(TAG_ROLE) != ROLE_AGENT or not tags.get(TAG_PROJECT) or not tags.get(TAG_AGENT):
        return None
    exp = claims.get("exp")
    return AgentCredential(
        project_id=tags[TAG_PROJECT],
        agent_id=tags[TAG_AGENT],
        user_id=tags.get(TAG_USER) or None,
        expires_at=int(exp) if isinstance(exp, int) else None,
    )


CREDS_FILE: Final = "NATS_CREDS"
CREDS_CONTENT: Final = "NATS_CREDS_CONTENT"


def creds_source(settings: NatsSettings) -> tuple[str, str]:
    """(creds text, the variable it came from); the error names the variable, never the text."""
    if settings.creds_content is not None:
        return settings.creds_content.get_secret_value(), CREDS_CONTENT
    if settings.creds is None:
        raise CredentialsError("is not set", field=CREDS_FILE)
    try:
        return settings.creds.read_text(), CREDS_FILE
    except (OSError, UnicodeDecodeError):
        raise CredentialsError(f"{settings.creds} is not a readable file", field=CREDS_FILE) from None


def credential_of(text: str, variable: str = CREDS_FILE) -> AgentCredential | None:
    """The agent a creds file is for (None: not an agent's); its seed is registered as a secret."""
    try:
        jwt, seed = parse_creds(text)
        register_secret(seed.decode())
        return agent_of(jwt)
    except CredentialsError as exc:
        raise CredentialsError(exc.message.removeprefix(f"{exc.field}: "), field=variable) from None


def creds_in_use(settings: NatsSettings) -> tuple[str, str] | None:
    """The creds text ``connect`` authenticates with, and its variable (None: it uses none;
    credentials in the URL, a user or a token win over a creds file)."""
    if not (settings.creds or settings.creds_content) or settings.user or settings.token:
        return None
    if settings.url and "@" in settings.url:
        return None
    return creds_source(settings)


def agent_credential(settings: NatsSettings) -> AgentCredential | None:
    """The Loom agent this process's NATS credentials are for, if they are an agent's."""
    found = creds_in_use(settings)
    return None if found is None else credential_of(*found)


# -- the server side -------------------------------------------------------------------
@dataclass
class Issuer:
    """The seeds behind a Loom NATS: who may sign accounts (operator) and users (accounts).

    Weft holds it; the nats-server holds only public JWTs (:func:`server_auth_config`)."""

    operator_seed: bytes
    system_seed: bytes
    account_seed: bytes
    operator_name: str = "loom"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def generate(cls) -> Issuer:
        return cls(new_seed(OPERATOR), new_seed(ACCOUNT), new_seed(ACCOUNT))

    @property
    def account(self) -> str:
        return public_key(self.account_seed)

    @property
    def system_account(self) -> str:
        return public_key(self.system_seed)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": 1,
                "operator_seed": self.operator_seed.decode(),
                "system_account_seed": self.system_seed.decode(),
                "account_seed": self.account_seed.decode(),
                "operator_name": self.operator_name,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> Issuer:
        try:
            data = json.loads(text)
            issuer = cls(
                operator_seed=str(data["operator_seed"]).encode(),
                system_seed=str(data["system_account_seed"]).encode(),
                account_seed=str(data["account_seed"]).encode(),
                operator_name=str(data.get("operator_name") or "loom"),
            )
            kinds = (
                (issuer.operator_seed, "O", "operator_seed"),
                (issuer.system_seed, "A", "system_account_seed"),
                (issuer.account_seed, "A", "account_seed"),
            )
            for seed, kind, name in kinds:
                if not public_key(seed).startswith(kind):
                    raise CredentialsError(f"{name}: must be an nkey seed of kind {kind}", field=name)
        except CredentialsError:
            raise
        except Exception:
            raise CredentialsError(
                "is not a Loom NATS issuer file (operator_seed, system_account_seed, account_seed)",
                field="issuer",
            ) from None
        return issuer

    def operator_jwt(self) -> str:
        return operator_jwt(self.operator_seed, name=self.operator_name, system_account=self.system_account)

    def system_account_jwt(self) -> str:
        return account_jwt(self.system_seed, self.operator_seed, name="SYS", jetstream=False)

    def account_jwt(self, revocations: dict[str, int] | None = None, issued_at: int | None = None) -> str:
        return account_jwt(
            self.account_seed,
            self.operator_seed,
            name="LOOM",
            jetstream=True,
            revocations=revocations,
            issued_at=issued_at,
        )

    def claims_update_subject(self) -> str:
        """Where a system-account user pushes this account's new JWT (any resolver)."""
        return f"$SYS.REQ.ACCOUNT.{self.account}.CLAIMS.UPDATE"

    def user_creds(
        self,
        name: str,
        permissions: Permissions,
        *,
        expires_at: int | None = None,
        tags: dict[str, str] | None = None,
        system: bool = False,
    ) -> tuple[str, str]:
        """(creds file text, user public key) for a new user key of the Loom (or system) account."""
        seed = new_seed(USER)
        register_secret(seed.decode())  # masked wherever it might be logged
        key = public_key(seed)
        jwt = user_jwt(
            key,
            self.system_seed if system else self.account_seed,
            name=name,
            permissions=permissions,
            expires_at=expires_at,
            tags=tags,
        )
        return creds_text(jwt, seed), key


def _full_resolver(folder: str) -> str:
    return f'resolver: {{ type: full, dir: {json.dumps(folder)}, allow_delete: false, interval: "2m" }}'


def server_auth_config(issuer: Issuer, resolver_dir: str | None, *, account_jwt: str | None = None) -> str:
    """The nats.conf lines of operator mode: the operator, the system account, a ``full``
    resolver in ``resolver_dir`` (it keeps pushed account updates, revocations included, on
    disk and shares them across a cluster; None: a ``MEMORY`` resolver, which applies pushed
    updates until the server restarts) preloaded with both accounts. Holds no secret."""
    preload = {
        issuer.system_account: issuer.system_account_jwt(),
        issuer.account: account_jwt or issuer.account_jwt(),
    }
    lines = [
        # an agent's JWT lists its permissions and arrives in the CONNECT line: 4 KB
        # (the default) is too short for it
        f"max_control_line: {MAX_CONTROL_LINE}",
        f"operator: {json.dumps(issuer.operator_jwt())}",
        f"system_account: {json.dumps(issuer.system_account)}",
        "resolver: MEMORY" if resolver_dir is None else _full_resolver(resolver_dir),
        "resolver_preload: {",
        *(f"  {key}: {json.dumps(value)}" for key, value in preload.items()),
        "}",
    ]
    return "\n".join(lines) + "\n"
