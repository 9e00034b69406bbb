"""Every NATS subject, stream, KV bucket and consumer name Loom uses.

One module so that isolation between projects is a property of a handful of
functions rather than of every call site: every name that holds project data
embeds the validated project id, and every token that becomes part of a
subject is validated as a single NATS token first.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from shared.errors import Invalid
from shared.limits import PRIORITY_MAX, PRIORITY_MIN

PROJECT_ID_RULE: Final = "lowercase letters, digits and '-', starting with a letter or digit, 1-63 characters"
AGENT_ID_RULE: Final = "exactly 32 lowercase hex characters"
HANDLE_RULE: Final = "lowercase letters, digits and '-', 1-64 characters"
TOKEN_RULE: Final = "lowercase letters, digits, '-' and '_', starting with a letter or digit, 1-64 characters"
SOURCE_PATTERN: Final = r"[a-z][a-z0-9._+-]{0,63}"
"""A context handle's source system: ``git``, ``s3``, ``postgres``, ``loom-work``, ..."""
SOURCE_RULE: Final = (
    "a source system's name: lowercase letters, digits, '.', '_', '+' and '-', starting with a letter "
    "(1-64 characters)"
)
USER_ID_RULE: Final = "exactly 16 lowercase hex characters"
WORK_ID_RULE: Final = "exactly 32 lowercase hex characters (a work item id)"
ID_RULE: Final = "exactly 32 lowercase hex characters"

# The one copy of each id and token pattern. They are unanchored (use ``fullmatch``);
# a JSON Schema or pydantic ``pattern`` takes :func:`anchored` of one.
PROJECT_ID_PATTERN: Final = r"[a-z0-9][a-z0-9-]{0,62}"
ID_PATTERN: Final = r"[0-9a-f]{32}"
"""Every 32-hex id (``shared.models.new_id``): agents, work items, context trees and nodes,
questions, leases, targets, spin-ups, memories."""
AGENT_ID_PATTERN: Final = ID_PATTERN
USER_ID_PATTERN: Final = r"[0-9a-f]{16}"
HANDLE_PATTERN: Final = r"[a-z0-9-]{1,64}"
TOKEN_PATTERN: Final = r"[a-z0-9][a-z0-9_-]{0,63}"
"""One subject token: capability, boundary, channel, agent type, category, target name."""
MEDIA_TYPE_PATTERN: Final = r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,127}"
"""A media type without parameters (``type/subtype``, lower case): an artifact file's."""
MEDIA_TYPE_RULE: Final = "a media type such as text/plain or application/pdf (type/subtype, lower case)"


def anchored(pattern: str) -> str:
    """``pattern`` matched against the whole value: JSON Schema and pydantic patterns
    match anywhere in a string unless anchored."""
    return f"^{pattern}$"


_PROJECT_ID = re.compile(PROJECT_ID_PATTERN)
_AGENT_ID = re.compile(ID_PATTERN)
_USER_ID = re.compile(USER_ID_PATTERN)
_HANDLE = re.compile(HANDLE_PATTERN)
_TOKEN = re.compile(TOKEN_PATTERN)
_MEDIA_TYPE = re.compile(MEDIA_TYPE_PATTERN)

SUBJECT_ROOT: Final = "loom"
ANY_AGENT_TYPE: Final = "_any"
"""Queue-subject token for work without a required agent type (never a valid agent type)."""


class WorkSubjectParts(NamedTuple):
    capability: str
    boundary: str
    agent_type: str | None
    priority: int
    not_for: str | None = None
    """The agent that may not take it (a review task: the agent whose work it reviews)."""
    only_for: str | None = None
    """The one agent that may take it (work a landing sent back to its author)."""


NOT_FOR_PREFIX: Final = "not-"
ONLY_FOR_PREFIX: Final = "for-"
LAND_CAPABILITY: Final = "land"
"""The capability of landers (docs/landing.md): items queued for landing wait on its subjects."""
_PLAIN_KEY = re.compile(r"[-/_=a-zA-Z0-9]+(?:\.[-/_=a-zA-Z0-9]+)*")


class AgentAccess(NamedTuple):
    """Subjects one agent's NATS credentials may publish and subscribe to (see
    :meth:`ProjectNames.agent_access`); everything else is refused by the server."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


class InvalidNameError(Invalid, ValueError):
    """A name that cannot safely become part of a NATS subject or bucket.

    A ``ValueError`` too, so pydantic validators that call the ``validate_*``
    functions turn it into a field error. The rejected value is not kept: it may
    be a secret pasted into the wrong field."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"must be {rule}", field=field, rule=rule)


def _check(pattern: re.Pattern[str], value: object, field: str, rule: str) -> str:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise InvalidNameError(field, rule)
    return value


def validate_project_id(value: object, field: str = "project_id") -> str:
    return _check(_PROJECT_ID, value, field, PROJECT_ID_RULE)


def validate_agent_id(value: object, field: str = "agent_id") -> str:
    return _check(_AGENT_ID, value, field, AGENT_ID_RULE)


def validate_work_id(value: object, field: str = "work_id") -> str:
    """Work ids have the agent ids' shape (``shared.models.new_id``)."""
    return _check(_AGENT_ID, value, field, WORK_ID_RULE)


def is_work_id(value: object) -> bool:
    return isinstance(value, str) and _AGENT_ID.fullmatch(value) is not None


is_full_id = is_work_id
"""A whole 32-hex id (work items, agents, questions share the shape), not a prefix of one."""


def validate_user_id(value: object, field: str = "user_id") -> str:
    return _check(_USER_ID, value, field, USER_ID_RULE)


def validate_id(value: object, field: str) -> str:
    """A 32-hex id that is not an agent id: a context tree or node id."""
    return _check(_AGENT_ID, value, field, ID_RULE)


def validate_handle(value: object, field: str = "handle") -> str:
    return _check(_HANDLE, value, field, HANDLE_RULE)


def validate_token(value: object, field: str) -> str:
    """A single subject token: capability, boundary, channel name, agent type, category."""
    return _check(_TOKEN, value, field, TOKEN_RULE)


def validate_media_type(value: object, field: str = "media_type") -> str:
    return _check(_MEDIA_TYPE, value, field, MEDIA_TYPE_RULE)


def is_token(value: object) -> bool:
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def validate_capability(value: object, field: str = "capability") -> str:
    return validate_token(value, field)


def validate_boundary(value: object, field: str = "boundary") -> str:
    return validate_token(value, field)


def validate_channel(value: object, field: str = "channel") -> str:
    return validate_token(value, field)


def validate_agent_type(value: object, field: str = "agent_type") -> str:
    return validate_token(value, field)


def validate_priority(value: object, field: str = "priority") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (PRIORITY_MIN <= value <= PRIORITY_MAX):
        raise InvalidNameError(field, f"an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")
    return value


class ProjectNames:
    """All names for one project. Construct once; every method is pure."""

    def __init__(self, project_id: str) -> None:
        self.project_id = validate_project_id(project_id)
        self._p = self.project_id
        self._root = f"{SUBJECT_ROOT}.{self._p}"

    def __repr__(self) -> str:
        return f"ProjectNames({self.project_id!r})"

    # -- channels: one stream per channel so each has its own limits ---------
    def channel_stream(self, channel: str) -> str:
        return f"LOOM-{self._p}-CHAN-{validate_channel(channel)}"

    def channel_subject(self, channel: str) -> str:
        return f"{self._root}.chan.{validate_channel(channel)}"

    @property
    def channel_subjects(self) -> str:
        """Every channel of the project (one token per channel)."""
        return f"{self._root}.chan.*"

    @property
    def channel_stream_prefix(self) -> str:
        return f"LOOM-{self._p}-CHAN-"

    # -- registry -------------------------------------------------------------
    @property
    def registry_bucket(self) -> str:
        return f"loom-{self._p}-agents"

    # -- direct messages ------------------------------------------------------
    @property
    def inbox_stream(self) -> str:
        return f"LOOM-{self._p}-INBOX"

    @property
    def inbox_subjects(self) -> str:
        return f"{self._root}.inbox.>"

    def inbox_subject(self, agent_id: str) -> str:
        return f"{self._root}.inbox.{validate_agent_id(agent_id)}"

    def inbox_consumer(self, agent_id: str) -> str:
        return f"inbox-{self._p}-{validate_agent_id(agent_id)}"

    @property
    def instance_locks_bucket(self) -> str:
        """Which instance ids are taken by live Warp processes (keys are agent ids, TTL'd)."""
        return f"loom-{self._p}-instances"

    # -- agent control (shutdown requests from Weft) --------------------------
    def control_subject(self, agent_id: str) -> str:
        return f"{self._root}.control.{validate_agent_id(agent_id)}"

    # -- work -----------------------------------------------------------------
    @property
    def work_stream(self) -> str:
        return f"LOOM-{self._p}-WORK"

    @property
    def work_subjects(self) -> str:
        return f"{self._root}.work.q.>"

    def work_subject(
        self,
        capability: str,
        boundary: str,
        agent_type: str | None,
        priority: int,
        not_for: str | None = None,
        only_for: str | None = None,
    ) -> str:
        """Queue subject ``loom.<p>.work.q.<capability>.<boundary>.<type|_any>.p<NN>``, for
        a review task ``....p<NN>.not-<agent-id>`` (the agent whose work it reviews), and for
        work reserved for one agent ``....p<NN>.for-<agent-id>``.

        Boundary, required agent type, priority and the excluded agent are subject tokens
        so that a claim can see which queues hold work it may take (one stream-info call)
        and take the highest priority first without fetching anything it may not take.
        """
        cap = validate_capability(capability)
        bnd = validate_boundary(boundary)
        typ = ANY_AGENT_TYPE if agent_type is None else validate_agent_type(agent_type, "required_agent_type")
        prio = validate_priority(priority)
        subject = f"{self._root}.work.q.{cap}.{bnd}.{typ}.p{prio:02d}"
        if not_for is not None and only_for is not None:
            raise InvalidNameError("only_for", "given without not_for")
        if not_for is not None:
            subject += f".{NOT_FOR_PREFIX}{validate_agent_id(not_for, 'not_for')}"
        elif only_for is not None:
            subject += f".{ONLY_FOR_PREFIX}{validate_agent_id(only_for, 'only_for')}"
        return subject

    def parse_work_subject(self, subject: str) -> WorkSubjectParts | None:
        """Inverse of :meth:`work_subject`; None for anything else."""
        prefix = f"{self._root}.work.q."
        if not subject.startswith(prefix):
            return None
        parts = subject[len(prefix) :].split(".")
        if len(parts) not in (4, 5) or not parts[3].startswith("p") or not parts[3][1:].isdigit():
            return None
        not_for = only_for = None
        if len(parts) == 5:
            prefix = parts[4][:4]
            agent = parts[4][4:]
            if prefix not in (NOT_FOR_PREFIX, ONLY_FOR_PREFIX) or _AGENT_ID.fullmatch(agent) is None:
                return None
            if prefix == NOT_FOR_PREFIX:
                not_for = agent
            else:
                only_for = agent
        cap, bnd, typ, prio = parts[:4]
        return WorkSubjectParts(
            capability=cap,
            boundary=bnd,
            agent_type=None if typ == ANY_AGENT_TYPE else typ,
            priority=int(prio[1:]),
            not_for=not_for,
            only_for=only_for,
        )

    def work_consumer(self, subject: str) -> str:
        """Durable consumer shared by every claimant of one queue subject.

        Hashed so the name stays short whatever the token lengths.
        """
        if not subject.startswith(f"{self._root}.work.q."):
            raise InvalidNameError("subject", "a work queue subject of this project")
        return "wq-" + hashlib.sha256(subject.encode()).hexdigest()[:24]

    @property
    def config_bucket(self) -> str:
        """Project-wide settings shared through NATS (the boundary policy)."""
        return f"loom-{self._p}-config"

    @property
    def work_records_bucket(self) -> str:
        return f"loom-{self._p}-work"

    @property
    def dlq_stream(self) -> str:
        return f"LOOM-{self._p}-DLQ"

    @property
    def dlq_subjects(self) -> str:
        return f"{self._root}.dlq.>"

    def dlq_subject(self, capability: str) -> str:
        return f"{self._root}.dlq.{validate_capability(capability)}"

    @property
    def questions_bucket(self) -> str:
        """Agents' questions to the operator and their answers (key: question id)."""
        return f"loom-{self._p}-questions"

    @property
    def leases_bucket(self) -> str:
        """File leases (docs/leases.md; key: lease id). Acquires are compare-and-set on the
        bucket's last sequence, which also numbers each grant (its fencing token)."""
        return f"loom-{self._p}-leases"

    @property
    def landing_bucket(self) -> str:
        """Who is landing on each target branch now (docs/landing.md; key:
        :func:`landing_key`): one landing at a time, compare-and-set."""
        return f"loom-{self._p}-landing"

    # -- targets and spin-up --------------------------------------------------
    @property
    def targets_bucket(self) -> str:
        return f"loom-{self._p}-targets"

    @property
    def spinups_bucket(self) -> str:
        return f"loom-{self._p}-spinups"

    # -- memory ---------------------------------------------------------------
    @property
    def memory_bucket(self) -> str:
        return f"loom-{self._p}-memory"

    # -- context trees (docs/context.md) ---------------------------------------
    @property
    def context_stream(self) -> str:
        """Every context tree of the project: one subject per tree, one message per node."""
        return f"LOOM-{self._p}-CTX"

    @property
    def context_subjects(self) -> str:
        return f"{self._root}.ctx.>"

    def context_subject(self, tree_id: str) -> str:
        return f"{self._root}.ctx.{validate_id(tree_id, 'tree_id')}"

    def parse_context_subject(self, subject: str) -> str | None:
        """The tree id of a context subject of this project, or None."""
        prefix = f"{self._root}.ctx."
        tail = subject[len(prefix) :] if subject.startswith(prefix) else ""
        return tail if _AGENT_ID.fullmatch(tail) else None

    @property
    def contexts_bucket(self) -> str:
        """Listing index of the project's trees (threads, created trees); the trees
        themselves live in :attr:`context_stream`."""
        return f"loom-{self._p}-contexts"

    @property
    def lineage_bucket(self) -> str:
        """Sub-agent -> parent records (key: the sub-agent's id), so a sub-agent of a
        sub-agent can find its whole parent chain (each link checked by derivation)."""
        return f"loom-{self._p}-lineage"

    # -- usage and budgets (docs/operations.md) ---------------------------------
    @property
    def usage_bucket(self) -> str:
        """Usage counted per UTC day (keys ``<day>`` for the project, ``<day>.t.<target>`` per
        target), added to by each report, read where a daily budget is enforced."""
        return f"loom-{self._p}-usage"

    @property
    def budgets_bucket(self) -> str:
        """The project's run-time limits (key ``budgets``): written by Weft, read by agents."""
        return f"loom-{self._p}-budgets"

    # -- A2A push notifications (Weft only) ------------------------------------
    @property
    def a2a_push_bucket(self) -> str:
        """Where A2A clients' webhooks for the project's tasks are kept (key:
        ``<task id>.<hash of the config id>``); no agent may read it (it holds their tokens)."""
        return f"loom-{self._p}-a2a-push"

    @property
    def a2a_push_consumer(self) -> str:
        """The durable consumer of the project's work events that every Weft replica pulls
        from to send push notifications, so each event is sent by one of them."""
        return f"a2a-push-{self._p}"

    # -- notifications (Weft only, docs/operator.md) ---------------------------
    @property
    def notify_bucket(self) -> str:
        """The project's notification sinks (key ``sink.<name>``, with its URL: a secret) and
        their delivery status (``status.<name>``); no agent may read it."""
        return f"loom-{self._p}-notify"

    @property
    def notify_marks_bucket(self) -> str:
        """Short-lived marks shared by Weft replicas: a notice already sent to a sink
        (``sent.<sink>.<hash>``, dedupe) and each sink's sends of the last minute by second
        (``rate.<sink>``)."""
        return f"loom-{self._p}-notify-marks"

    @property
    def notify_consumer(self) -> str:
        """The durable consumer of the project's events every Weft replica pulls from to send
        notifications, so each event is handled by one of them."""
        return f"notify-{self._p}"

    # -- traces (docs/operations.md, Traces) -----------------------------------
    @property
    def traces_stream(self) -> str:
        """The spans of the project's work items, one subject per item: each process
        publishes the spans it made, so Weft can show an item's timeline without a collector."""
        return f"LOOM-{self._p}-TRACES"

    @property
    def trace_subjects(self) -> str:
        return f"{self._root}.trace.*"

    def trace_subject(self, work_id: str) -> str:
        return f"{self._root}.trace.{validate_work_id(work_id)}"

    # -- events ---------------------------------------------------------------
    @property
    def events_stream(self) -> str:
        return f"LOOM-{self._p}-EVENTS"

    @property
    def events_subjects(self) -> str:
        return f"{self._root}.events.>"

    def event_subject(self, kind: str, action: str) -> str:
        """Event subjects: ``loom.<p>.events.<kind>.<action>`` (kind: work, agent, target, spinup,
        question, lease, project, context)."""
        if kind not in EVENT_KINDS:
            raise InvalidNameError("kind", f"one of {', '.join(EVENT_KINDS)}")
        return f"{self._root}.events.{kind}.{validate_token(action, 'action')}"

    def event_filter(self, kind: str | None = None) -> str:
        if kind is None:
            return self.events_subjects
        if kind not in EVENT_KINDS:
            raise InvalidNameError("kind", f"one of {', '.join(EVENT_KINDS)}")
        return f"{self._root}.events.{kind}.>"

    # -- provisioning (Weft creates streams and buckets for scoped agents) ---
    @property
    def provision_subject(self) -> str:
        """Where an agent whose credentials may not create streams asks Weft to create one."""
        return f"{self._root}.provision"


JS_API: Final = "$JS.API"
PROVISION_SUBJECTS: Final = f"{SUBJECT_ROOT}.*.provision"
"""Every project's provisioning subject (Weft answers them all, as one queue group)."""

EVENT_KINDS: Final = ("work", "agent", "target", "spinup", "question", "lease", "project", "context")


AGENT_PROTOCOL_AGENT: Final = "loom"
"""The ``agent`` token of Synadia's Agent Protocol under which Loom's agents serve it
(``agents.<verb>.loom.<project>.<agent-id>``; docs/interop.md)."""
AGENT_PROTOCOL_MESSAGE_TYPE: Final = "prompt"
"""The message type of a direct message that is a protocol prompt (warp/protocol.py)."""
AGENT_PROTOCOL_SERVICE: Final = "agents"
"""The NATS micro service name every agent of the protocol registers."""


def agent_protocol_subject(verb: str, project_id: str, agent_id: str) -> str:
    """``agents.<verb>.loom.<project>.<agent-id>``: both ids are already natural tokens of the
    protocol (lowercase letters, digits, '-'), so none is escaped."""
    project, agent = validate_project_id(project_id), validate_agent_id(agent_id)
    return f"agents.{verb}.{AGENT_PROTOCOL_AGENT}.{project}.{agent}"


def agent_inbox_prefix(agent_id: str) -> str:
    """The reply-subject prefix of an agent with scoped credentials: its replies and
    deliveries arrive under it, and no other agent may subscribe there."""
    return f"_INBOX.{validate_agent_id(agent_id)}"


# -- names not tied to one project --------------------------------------------
# The segment after ``loom-`` starts with '_', which no project id can, so no
# project (not even one called ``global``, ``public`` or ``user-...``) can own
# a bucket with one of these names.
GLOBAL_REGISTRY_BUCKET: Final = "loom-_global-agents"
"""Registry entries of scope ``personal`` and ``public``, visible across projects."""

PUBLIC_MEMORY_BUCKET: Final = "loom-_public-memory"

AUTH_BUCKET: Final = "loom-_auth"
"""Weft's record of revoked agent credentials (no agent may read or write it)."""

BUILT_IN_CHANNELS: Final = ("roadmap", "parallel-work", "errors")
"""Channels every project has (Warp's defaults); scoped credentials always include them."""

_USER_MEMORY = re.compile(f"loom-_user-{USER_ID_PATTERN}-memory")


def is_user_memory_bucket(bucket: str) -> bool:
    return _USER_MEMORY.fullmatch(bucket) is not None


def landing_key(target: str) -> str:
    """The landing bucket's key for a target branch: the name itself when a KV key may be
    it, else a digest of it (a branch may hold characters a key may not)."""
    if _PLAIN_KEY.fullmatch(target):
        return f"target.{target}"
    return f"digest.{hashlib.sha256(target.encode()).hexdigest()[:32]}"


def user_memory_bucket(user_id: str) -> str:
    """Personal memories follow a user across projects."""
    return f"loom-_user-{validate_user_id(user_id)}-memory"


def project_of_subject(subject: str) -> str | None:
    """The project id embedded in a Loom subject, or None for a foreign subject."""
    parts = subject.split(".")
    if len(parts) < 2 or parts[0] != SUBJECT_ROOT:
        return None
    return parts[1] if _PROJECT_ID.fullmatch(parts[1]) else None


def kv_stream(bucket: str) -> str:
    """The stream JetStream keeps a KV bucket in."""
    return f"KV_{bucket}"


def kv_subject(bucket: str, key: str) -> str:
    """The subject one key of a KV bucket is stored under."""
    return f"$KV.{bucket}.{key}"


def project_of_spinups_stream(stream: str) -> str | None:
    """The project whose spin-ups KV bucket is backed by ``stream``, or None: how a
    restarted Weft finds projects it was never asked about."""
    prefix, suffix = kv_stream("loom-"), "-spinups"
    if not (stream.startswith(prefix) and stream.endswith(suffix)):
        return None
    project = stream[len(prefix) : -len(suffix)]
    if not _PROJECT_ID.fullmatch(project) or kv_stream(ProjectNames(project).spinups_bucket) != stream:
        return None
    return project


class ProjectResource(NamedTuple):
    project_id: str
    name: str
    """The stream's name, or the bucket's (without ``KV_``)."""
    bucket: bool


_PROJECT_STREAM = re.compile(f"LOOM-(?P<p>{PROJECT_ID_PATTERN})-(?P<what>WORK|DLQ|EVENTS|INBOX|CHAN-.+)")
_PROJECT_BUCKET = re.compile(
    f"{kv_stream('loom-')}(?P<p>{PROJECT_ID_PATTERN})-(?P<what>agents|config|work|targets|spinups|memory)"
)


def project_resource(stream: str) -> ProjectResource | None:
    """The project a JetStream stream belongs to: its work, DLQ, events, inbox and channel
    streams, and those of its registry, config, work, targets, spin-ups and memory buckets;
    None for anything else. How Weft finds the projects with data on an account."""
    if (match := _PROJECT_BUCKET.fullmatch(stream)) is not None:
        names = ProjectNames(match["p"])
        bucket = {
            "agents": names.registry_bucket,
            "config": names.config_bucket,
            "work": names.work_records_bucket,
            "targets": names.targets_bucket,
            "spinups": names.spinups_bucket,
            "memory": names.memory_bucket,
        }[match["what"]]
        return ProjectResource(names.project_id, bucket, bucket=True) if kv_stream(bucket) == stream else None
    if (match := _PROJECT_STREAM.fullmatch(stream)) is None:
        return None
    names = ProjectNames(match["p"])
    what = match["what"]
    if what.startswith("CHAN-"):
        try:
            ok = names.channel_stream(what.removeprefix("CHAN-")) == stream
        except InvalidNameError:
            ok = False
    else:
        ok = stream in (names.work_stream, names.dlq_stream, names.events_stream, names.inbox_stream)
    return ProjectResource(names.project_id, stream, bucket=False) if ok else None


def agent_access(
    names: ProjectNames, agent_id: str, *, user_id: str | None = None, channels: Iterable[str] = ()
) -> AgentAccess:
    """The permissions of one agent's scoped NATS credentials: exactly what Warp (and
    Pattern in it) use, for this project, this agent and the given channels.

    One line per subject family: a new family is one line here. The server enforces
    the list; nothing outside it (another project, another agent's inbox, consumer or
    control subject, stream or bucket administration) is reachable.
    """
    a = validate_agent_id(agent_id)
    project_streams = (
        names.inbox_stream,
        names.work_stream,
        names.dlq_stream,
        names.events_stream,
        names.context_stream,
        names.traces_stream,
    )
    js = JS_API
    chans = sorted({validate_channel(c) for c in channels})
    chan_streams = [names.channel_stream(c) for c in chans]
    user_buckets = [user_memory_bucket(user_id)] if user_id else []
    buckets = [  # readable key-value buckets (reads, watches)
        names.registry_bucket,
        GLOBAL_REGISTRY_BUCKET,
        names.instance_locks_bucket,
        names.work_records_bucket,
        names.config_bucket,
        names.memory_bucket,
        PUBLIC_MEMORY_BUCKET,
        names.questions_bucket,
        names.contexts_bucket,
        names.lineage_bucket,
        names.leases_bucket,
        names.usage_bucket,
        names.budgets_bucket,
        names.landing_bucket,
        *user_buckets,
    ]
    kv_streams = [kv_stream(b) for b in buckets]
    own_keys = [  # keys only this agent may write: its identity holds there
        kv_subject(names.registry_bucket, a),
        kv_subject(GLOBAL_REGISTRY_BUCKET, a),
        kv_subject(names.instance_locks_bucket, a),
        kv_subject(names.lineage_bucket, a),  # a sub-agent records its own parent
    ]
    shared_keys = [  # keys any agent of the project writes (work records, memories)
        kv_subject(b, ">")
        for b in (
            names.work_records_bucket,
            names.memory_bucket,
            PUBLIC_MEMORY_BUCKET,
            names.questions_bucket,  # questions an agent asks
            names.contexts_bucket,  # the listing of threads and trees agents start
            names.leases_bucket,  # leases agents take, renew and release
            names.usage_bucket,  # the day's usage counters each report adds to
            names.landing_bucket,  # the landing lock landers take in turn
            *user_buckets,
        )
    ]
    inbox_consumer = names.inbox_consumer(a)
    publish = [
        names.channel_subjects,  # send to the project's channels
        f"{names._root}.inbox.*",  # send a direct message to any agent of the project
        names.work_subjects,  # submit and requeue work
        names.dlq_subjects,  # dead-letter failed work
        names.event_filter("work"),  # announce work transitions
        names.event_filter("question"),  # announce questions asked
        names.event_filter("lease"),  # announce leases taken, renewed and released
        names.context_subjects,  # context nodes: work hand-offs, threads, trees
        names.trace_subjects,  # the spans of work items it holds (each item's timeline)
        names.provision_subject,  # ask Weft to create a missing stream or bucket
        *own_keys,
        *shared_keys,
        f"{js}.INFO",  # account info (Pattern checks the server's features)
        *(f"{js}.STREAM.INFO.{s}" for s in (*project_streams, *chan_streams, *kv_streams)),
        *(f"{js}.DIRECT.GET.{s}" for s in (*chan_streams, *kv_streams, names.context_stream)),
        f"{js}.DIRECT.GET.{names.context_stream}.>",  # a tree's nodes, read by its subject
        *(f"{js}.DIRECT.GET.{s}.>" for s in kv_streams),  # key reads name the key's subject
        # a key a replica called absent, asked again of the leader (jetstream.get_or_none)
        *(f"{js}.STREAM.MSG.GET.{s}" for s in kv_streams),
        f"{js}.STREAM.MSG.GET.{names.dlq_stream}",  # list dead letters
        f"{js}.STREAM.MSG.DELETE.{names.dlq_stream}",  # retry or discard a dead letter
        f"{js}.CONSUMER.CREATE.{names.work_stream}.*.{names.work_subjects}",  # queue consumers
        f"{js}.CONSUMER.INFO.{names.work_stream}.*",
        f"{js}.CONSUMER.MSG.NEXT.{names.work_stream}.*",  # claim
        f"$JS.ACK.{names.work_stream}.>",  # ack, progress, fail a claim (also after a restart)
        # its own inbox consumer only, created with its own filter (the server checks it)
        f"{js}.CONSUMER.CREATE.{names.inbox_stream}.{inbox_consumer}.{names.inbox_subject(a)}",
        f"{js}.CONSUMER.INFO.{names.inbox_stream}.{inbox_consumer}",
        f"{js}.CONSUMER.MSG.NEXT.{names.inbox_stream}.{inbox_consumer}",
        f"$JS.ACK.{names.inbox_stream}.{inbox_consumer}.>",
        *(f"{js}.CONSUMER.CREATE.{s}" for s in kv_streams),  # watches (ephemeral, ordered)
        *(f"{js}.CONSUMER.INFO.{s}.*" for s in kv_streams),
    ]
    service = AGENT_PROTOCOL_SERVICE
    publish.append(agent_protocol_subject("hb", names.project_id, a))  # its protocol heartbeats
    subscribe = [
        f"{agent_inbox_prefix(a)}.>",  # replies to its own requests, its watches' deliveries
        names.control_subject(a),  # shutdown and cancel-work requests for it alone
        # the agent protocol (docs/interop.md): its own prompt and status endpoints, and the
        # micro service discovery requests every service answers
        agent_protocol_subject("prompt", names.project_id, a),
        agent_protocol_subject("status", names.project_id, a),
        *(f"$SRV.{verb}" for verb in ("PING", "INFO", "STATS")),
        *(f"$SRV.{verb}.{service}" for verb in ("PING", "INFO", "STATS")),
        *(f"$SRV.{verb}.{service}.*" for verb in ("PING", "INFO", "STATS")),
    ]
    return AgentAccess(publish=tuple(publish), subscribe=tuple(subscribe))
