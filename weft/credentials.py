"""Weft as the issuer of agents' NATS credentials (``WEFT_NATS_AUTH=scoped``).

NATS runs in operator mode (:mod:`shared.nats.auth`). Weft holds the issuer's seeds and:

* **issues** an agent's credentials: a fresh user key and a JWT with the agent's
  permissions (:meth:`shared.names.ProjectNames.agent_access`) and an expiry;
* **revokes** them: adds the user key to the account's revocation list (kept, revision-
  checked, in the ``loom-_auth`` bucket) and pushes the re-signed account JWT to the servers
  through a system-account connection, which close the user's connections at once;
* **provisions** streams and buckets for agents, which their credentials may not create:
  a request on ``loom.<project>.provision`` names a stream or bucket of that project (or a
  shared one); anything else is refused, and only whitelisted settings are taken (no
  sources, mirrors or republishing, which could copy another project's messages).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, KeyValueConfig, RetentionPolicy, StorageType, StreamConfig
from pydantic import SecretStr

from shared.errors import Conflict, Invalid, LoomError, Unavailable
from shared.names import (
    AUTH_BUCKET,
    BUILT_IN_CHANNELS,
    GLOBAL_REGISTRY_BUCKET,
    JS_API,
    PROVISION_SUBJECTS,
    PUBLIC_MEMORY_BUCKET,
    ProjectNames,
    agent_access,
    is_token,
    is_user_memory_bucket,
    project_of_subject,
    validate_agent_id,
    validate_channel,
    validate_user_id,
)
from shared.nats.auth import (
    ROLE_AGENT,
    TAG_AGENT,
    TAG_PROJECT,
    TAG_ROLE,
    TAG_USER,
    Issuer,
    Permissions,
)
from shared.nats.cas import cas_upsert
from shared.nats.client import settle
from shared.nats.jetstream import (
    create_kv,
    create_or_keep_stream,
    differs,
    ensure_kv,
    get_or_none,
    kv_config,
    replicas_of,
)
from shared.redact import redact

log = logging.getLogger("loom.weft.credentials")

REVOCATIONS_KEY = "revocations"
PUSH_TIMEOUT_S = 5.0
MAX_TTL_S = 90 * 24 * 3600.0
UNKNOWN_EXPIRY_S = MAX_TTL_S
"""How long a revocation of a key whose expiry Weft does not know is kept."""
QUEUE_GROUP = "weft"


class CredentialsUnavailable(Conflict):
    """This Weft does not issue NATS credentials (NATS runs without scoped auth)."""

    def __init__(self) -> None:
        super().__init__(
            "this Weft does not issue NATS credentials: start it with WEFT_NATS_AUTH=scoped "
            "(docs/security.md)",
            field="nats_auth",
        )


class ProvisionRefused(Invalid):
    """A provisioning request names something an agent may not have created."""


@dataclass(frozen=True)
class IssuedCredential:
    project_id: str
    agent_id: str
    user_key: str
    """The user's public key: what a revocation names (not a secret)."""
    expires_at: datetime
    creds: SecretStr
    """The creds file: the user JWT and its nkey seed (a secret)."""


@dataclass
class Revocations:
    """The account's revocation list as Weft keeps it: user key -> (revoked at, expires at)."""

    users: dict[str, tuple[int, int]]
    issued_at: int = 0
    """The ``iat`` of the last account JWT signed from this list (strictly increasing, so the
    servers keep the newest even when two are signed within one second)."""

    @classmethod
    def parse(cls, raw: bytes | None) -> Revocations:
        if not raw:
            return cls(users={})
        data = json.loads(raw)
        users = {str(k): (int(v[0]), int(v[1])) for k, v in dict(data.get("users") or {}).items()}
        return cls(users=users, issued_at=int(data.get("iat") or 0))

    def to_bytes(self) -> bytes:
        return json.dumps({"iat": self.issued_at, "users": self.users}, sort_keys=True).encode()

    def without_expired(self, now: int) -> Revocations:
        """Keys whose JWTs expired anyway need no revocation any more (the list stays small)."""
        return Revocations(
            users={k: v for k, v in self.users.items() if v[1] >= now}, issued_at=self.issued_at
        )

    def claims(self) -> dict[str, int]:
        return {key: revoked_at for key, (revoked_at, _) in self.users.items()}


class CredentialAuthority:
    """Issues, revokes and provisions for agents with scoped credentials (module doc)."""

    def __init__(
        self,
        issuer: Issuer,
        nc: NatsClient,
        system_nc: NatsClient,
        *,
        default_ttl_s: float,
    ) -> None:
        self.issuer = issuer
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.system_nc = system_nc
        self.default_ttl_s = default_ttl_s
        self._sub: Subscription | None = None

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Push the account JWT the bucket describes (a server restarted from its preload
        learns the revocations again) and answer provisioning requests."""
        kv = await ensure_kv(self.js, AUTH_BUCKET, history=5, description="Loom revoked credentials")
        entry = await get_or_none(kv, REVOCATIONS_KEY)
        await self._push(Revocations.parse(entry.value if entry else None))
        self._sub = await self.nc.subscribe(PROVISION_SUBJECTS, queue=QUEUE_GROUP, cb=self._on_provision)
        await settle(self.nc)  # started means listening: an agent may ask at once

    async def stop(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            try:
                await sub.unsubscribe()
            except Exception as exc:  # the connection is already gone
                log.debug("provisioning unsubscribe: %s", exc)

    # -- issuing -----------------------------------------------------------------------------
    async def issue(
        self,
        project_id: str,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        channels: tuple[str, ...] = (),
        ttl_s: float | None = None,
    ) -> IssuedCredential:
        """Credentials for one agent of ``project_id`` (a new agent id unless one is given).

        They allow the project's built-in channels, every channel it has now and ``channels``."""
        names = ProjectNames(project_id)
        agent = validate_agent_id(agent_id) if agent_id else secrets.token_hex(16)
        # Its user (``personal`` scope, personal memories): a given one, else one of its own.
        user = validate_user_id(user_id) if user_id else agent[:16]
        ttl = self.default_ttl_s if ttl_s is None else ttl_s
        if not 1 <= ttl <= MAX_TTL_S:
            raise Invalid(f"must be between 1 and {MAX_TTL_S:.0f} seconds", field="ttl_s")
        wanted = {*BUILT_IN_CHANNELS, *(validate_channel(c) for c in channels)}
        wanted |= await self._existing_channels(names)
        access = agent_access(names, agent, user_id=user, channels=wanted)
        expires = int(time.time() + ttl)
        tags = {TAG_ROLE: ROLE_AGENT, TAG_PROJECT: names.project_id, TAG_AGENT: agent, TAG_USER: user}
        creds, key = self.issuer.user_creds(
            f"loom-agent {names.project_id}/{agent}", Permissions.of(access), expires_at=expires, tags=tags
        )
        log.info("issued NATS credentials %s for agent %s of project %s", key, agent, names.project_id)
        return IssuedCredential(
            project_id=names.project_id,
            agent_id=agent,
            user_key=key,
            expires_at=datetime.fromtimestamp(expires, UTC),
            creds=SecretStr(creds),
        )

    async def _existing_channels(self, names: ProjectNames) -> set[str]:
        """Channels whose streams exist in the project now (one stream-names request)."""
        request = json.dumps({"subject": names.channel_subject("x").rsplit(".", 1)[0] + ".*"}).encode()
        reply = await self.nc.request(f"{JS_API}.STREAM.NAMES", request, timeout=PUSH_TIMEOUT_S)
        found: set[str] = set()
        for stream in json.loads(reply.data).get("streams") or []:
            channel = str(stream).removeprefix(names.channel_stream_prefix)
            if channel != stream and is_token(channel):
                found.add(channel)
        return found

    # -- revoking ----------------------------------------------------------------------------
    async def revoke(self, user_key: str, expires_at: datetime | None = None) -> None:
        """Revoke one user key: the servers refuse it and close its connections now."""
        if not (user_key.startswith("U") and len(user_key) == 56):
            raise Invalid("must be a NATS user public key (U followed by 55 characters)", field="user_key")
        now = int(time.time())
        until = int(expires_at.timestamp()) if expires_at else now + int(UNKNOWN_EXPIRY_S)
        kv = await ensure_kv(self.js, AUTH_BUCKET, history=5, description="Loom revoked credentials")

        def revoked(stored: Revocations | None) -> Revocations:
            current = (Revocations.parse(None) if stored is None else stored).without_expired(now)
            current.users[user_key] = (now, until)
            current.issued_at = max(now, current.issued_at + 1)
            return current

        swap = await cas_upsert(
            kv,
            REVOCATIONS_KEY,
            revoked,
            parse=Revocations.parse,
            dump=Revocations.to_bytes,
            conflict=lambda: Unavailable(
                "revocations are being changed concurrently; try again", field="user_key"
            ),
        )
        current = swap.after
        assert current is not None
        await self._push(current)
        # another replica may have written (and pushed) a newer list meanwhile: the
        # servers keep the JWT with the highest iat, which is the newest list's
        latest = await get_or_none(kv, REVOCATIONS_KEY)
        if latest is not None and Revocations.parse(latest.value).issued_at > current.issued_at:
            await self._push(Revocations.parse(latest.value))
        log.info("revoked NATS credentials %s", user_key)

    async def _push(self, revocations: Revocations) -> None:
        jwt = self.issuer.account_jwt(revocations.claims(), issued_at=revocations.issued_at or None)
        subject = self.issuer.claims_update_subject()
        reply = await self.system_nc.request(subject, jwt.encode(), timeout=PUSH_TIMEOUT_S)
        answer = json.loads(reply.data or b"{}")
        if answer.get("error"):
            raise Unavailable(
                f"nats-server refused the account update: {redact(answer['error'].get('description', ''))}"
            )

    # -- provisioning -----------------------------------------------------------------------------
    async def _on_provision(self, msg: Msg) -> None:
        project = project_of_subject(msg.subject)
        try:
            if project is None:
                raise ProvisionRefused("is not a project's provisioning subject", field="subject")
            request = json.loads(msg.data)
            await self.provision(ProjectNames(project), str(request.get("kind")), dict(request["config"]))
            answer: dict[str, Any] = {"ok": True}
        except LoomError as exc:
            answer = {"ok": False, "error": exc.message}
        except (ValueError, KeyError, TypeError):
            answer = {"ok": False, "error": "request: must be {kind: stream|kv, config: {...}}"}
        except Exception as exc:
            log.warning("provisioning for project %s failed: %s", project, redact(exc))
            answer = {"ok": False, "error": "NATS refused to create it; see Weft's log"}
        if msg.reply:
            await self.nc.publish(msg.reply, json.dumps(answer).encode())

    async def provision(self, names: ProjectNames, kind: str, config: dict[str, Any]) -> None:
        """Create what an agent of ``names``' project asked for, if it may exist at all."""
        # create first, as ensure_stream does: agents starting together on a cluster ask at
        # once, and a stream's info goes unanswered while the stream just made has no leader
        if kind == "stream":
            stream = agent_stream(names, config, replicas=replicas_of(self.js))
            current = await create_or_keep_stream(self.js, stream)
            if (
                current is not None
                and str(stream.name).startswith(names.channel_stream_prefix)
                and differs(current.config, stream)
            ):
                await self.js.update_stream(stream)  # a channel's limits are its config's
        elif kind == "kv":
            # made as asked, or bound as it is when another agent's request made it otherwise
            await create_kv(self.js, agent_bucket(names, config, replicas=replicas_of(self.js)))
        else:
            raise ProvisionRefused("must be stream or kv", field="kind")


_STREAM_FIELDS = (
    "description",
    "max_msgs",
    "max_bytes",
    "max_age",
    "max_msgs_per_subject",
    "duplicate_window",
    "allow_direct",
)


def agent_stream(names: ProjectNames, config: dict[str, Any], *, replicas: int) -> StreamConfig:
    """The stream an agent asked for, if it is one of its project's (with exactly that
    stream's subjects), from whitelisted settings only; with Weft's ``replicas``."""
    name = str(config.get("name") or "")
    expected = {
        names.inbox_stream: names.inbox_subjects,
        names.work_stream: names.work_subjects,
        names.dlq_stream: names.dlq_subjects,
        names.events_stream: names.events_subjects,
        names.context_stream: names.context_subjects,
        names.traces_stream: names.trace_subjects,
    }
    if name.startswith(names.channel_stream_prefix):
        channel = name.removeprefix(names.channel_stream_prefix)
        if not is_token(channel):
            raise ProvisionRefused("is not a stream of this project", field="name")
        expected[name] = names.channel_subject(channel)
    if name not in expected:
        raise ProvisionRefused("is not a stream agents of this project use", field="name")
    if list(config.get("subjects") or []) != [expected[name]]:
        raise ProvisionRefused("must be exactly the stream's own subjects", field="subjects")
    parsed = StreamConfig.from_response(
        {k: config[k] for k in (*_STREAM_FIELDS, "retention", "discard") if k in config}
    )
    retention = RetentionPolicy(parsed.retention or RetentionPolicy.LIMITS)
    discard = DiscardPolicy(parsed.discard or DiscardPolicy.OLD)
    settings = {k: getattr(parsed, k) for k in _STREAM_FIELDS if getattr(parsed, k, None) is not None}
    return StreamConfig(
        name=name,
        subjects=[expected[name]],
        retention=retention,
        discard=discard,
        storage=StorageType.FILE,
        num_replicas=replicas,
        **settings,
    )


def agent_bucket(names: ProjectNames, config: dict[str, Any], *, replicas: int) -> KeyValueConfig:
    """The bucket an agent asked for, if agents may use it, from whitelisted settings only;
    with Weft's ``replicas``."""
    bucket = str(config.get("bucket") or "")
    allowed = {
        names.registry_bucket,
        names.instance_locks_bucket,
        names.work_records_bucket,
        names.config_bucket,
        names.memory_bucket,
        names.questions_bucket,
        names.contexts_bucket,
        names.lineage_bucket,
        names.usage_bucket,
        names.budgets_bucket,
        names.landing_bucket,
        GLOBAL_REGISTRY_BUCKET,
        PUBLIC_MEMORY_BUCKET,
    }
    if bucket not in allowed and not is_user_memory_bucket(bucket):
        raise ProvisionRefused("is not a bucket agents of this project use", field="bucket")
    return kv_config(config, replicas=replicas)
