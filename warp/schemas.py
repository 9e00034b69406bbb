"""Input types and structured outputs of Warp's tools.

Input constraints live in the types, so the JSON schema a client sees in
``tools/list`` is exactly what is enforced on a call (unknown arguments are
refused too). Outputs are the ``structuredContent`` of each result; each tool
also renders a short text for agents that read text only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.context.reads import HandleAt, LeavesView, NodeDetail, NodeRefView, ResolvedView
from shared.context.store import TreeEntry
from shared.context.trees import ContextNode, TreeMeta
from shared.models import Lease, Question, Scope, WorkItem, WorkStatus
from shared.names import (
    AGENT_ID_RULE,
    HANDLE_PATTERN,
    HANDLE_RULE,
    ID_PATTERN,
    TOKEN_PATTERN,
    TOKEN_RULE,
    anchored,
)

_TOKEN = anchored(TOKEN_PATTERN)
_ID = anchored(ID_PATTERN)

AgentId = Annotated[str, Field(pattern=_ID, description=f"An agent id as discover shows it: {AGENT_ID_RULE}")]
WorkId = Annotated[str, Field(pattern=_ID, description="A work item id: 32 lowercase hex characters")]
MessageId = Annotated[str, Field(pattern=_ID, description="A direct message id: 32 lowercase hex characters")]
Handle = Annotated[str, Field(pattern=anchored(HANDLE_PATTERN), description=f"A handle: {HANDLE_RULE}")]
Channel = Annotated[str, Field(pattern=_TOKEN, description=f"Channel name: {TOKEN_RULE}")]
Capability = Annotated[str, Field(pattern=_TOKEN, description=f"A capability: {TOKEN_RULE}")]
Boundary = Annotated[str, Field(pattern=_TOKEN, description=f"A boundary: {TOKEN_RULE}")]
AgentType = Annotated[str, Field(pattern=_TOKEN, description=f"An agent type: {TOKEN_RULE}")]
MessageType = Annotated[str, Field(pattern=_TOKEN, description=f"Message type: {TOKEN_RULE}")]
Category = Annotated[str, Field(pattern=_TOKEN, description=f"A question's category: {TOKEN_RULE}")]
Cursor = Annotated[
    str, Field(min_length=1, max_length=2000, description="next_cursor from a previous call, unchanged")
]
Body = Annotated[
    str, Field(min_length=1, max_length=64_000, description="Message text (up to 64,000 characters)")
]
Metadata = Annotated[
    dict[str, Annotated[str, Field(max_length=1000)]],
    Field(max_length=32, description="Up to 32 string key/values"),
]


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- handle -------------------------------------------------------------------------


class HandleInfo(Out):
    handle: str
    agent_id: str | None = Field(description="None until Warp has taken its instance id on NATS")
    project_id: str
    instance: int | None = Field(description="None until Warp has taken its instance id on NATS")
    registered: bool
    connected: bool


# -- channels -------------------------------------------------------------------------


class ChannelInfo(Out):
    name: str
    description: str
    max_messages: int
    max_bytes: int
    max_age_s: float
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    last_message_at: datetime | None = None


class ChannelList(Out):
    channels: list[ChannelInfo]
    config_files: list[str] = Field(description="Config files in effect, lowest precedence first")


class ChannelMessageOut(Out):
    seq: int
    channel: str
    sender_id: str
    sender_handle: str
    body: str
    scope: Scope
    sent_at: datetime
    metadata: dict[str, str] = Field(default_factory=dict)
    reply_to: int | None = Field(None, description="The sequence of the message this one answers")
    thread_id: str | None = Field(None, description="The thread it belongs to (warp_channels_thread)")


class ChannelSendOut(Out):
    channel: str
    seq: int
    scope: Scope
    sent_at: datetime
    reply_to: int | None = None
    thread_id: str | None = None


class ChannelReadOut(Out):
    channel: str
    messages: list[ChannelMessageOut]
    next_cursor: str = Field(description="Pass back to read what arrives after this page")
    has_more: bool = Field(description="More messages are already waiting after this page")
    skipped_expired: int = Field(0, description="Messages that expired before this cursor reached them")
    hidden: int = Field(0, description="Messages on this page you may not see (private/personal scope)")


# -- registry -------------------------------------------------------------------------


class AgentOut(Out):
    agent_id: str
    handle: str
    agent_type: str
    status: str = Field(description="Effective status: offline once 3 heartbeats are missed")
    capabilities: list[str]
    boundaries: list[str]
    current_tasks: int
    max_concurrent_tasks: int
    hostname: str
    scope: Scope
    project_id: str
    instance: int
    parent_id: str | None = None
    target_id: str | None = None
    spinup_id: str | None = None
    registered_at: datetime
    last_heartbeat: datetime
    last_activity: datetime
    metadata: dict[str, str] = Field(default_factory=dict)
    is_self: bool = False


class AgentList(Out):
    agents: list[AgentOut]
    count: int
    next_cursor: str | None = None


class Deregistered(Out):
    agent_id: str
    status: str
    was_registered: bool


# -- direct messages --------------------------------------------------------------------


class DirectSendOut(Out):
    message_id: str
    recipient_id: str
    recipient_status: Literal["online", "busy", "offline", "unregistered"]
    seq: int
    sent_at: datetime
    reply_to: str | None = None
    thread_id: str | None = None
    streamed: bool = Field(
        default=False,
        description="An answer to an agent-protocol prompt: streamed to its caller, in no inbox (seq 0)",
    )


class DirectMessageOut(Out):
    id: str
    seq: int
    sender_id: str
    sender_handle: str
    message_type: str
    body: str
    sent_at: datetime
    metadata: dict[str, str] = Field(default_factory=dict)
    reply_to: str | None = Field(None, description="The id of the message this one answers")
    thread_id: str | None = Field(None, description="The thread it belongs to (warp_messages_thread)")


class DirectReadOut(Out):
    messages: list[DirectMessageOut]
    next_cursor: str | None = Field(None, description="Present when more matching messages are waiting")
    has_more: bool
    left_waiting: int = Field(0, description="Waiting messages this read left for later (filtered or paged)")
    acknowledged: bool = Field(description="False for a peek: nothing was marked read")


# -- work ------------------------------------------------------------------------------


class WorkOut(Out):
    item: WorkItem


class HandOffOut(Out):
    """A work item's context, newest first and bounded (docs/context.md, Hand-offs)."""

    tree_id: str = Field(description="The item's context tree (its id is the work id)")
    attempt_node: str = Field(description="Your attempt's node: append your notes under it")
    nodes: list[ContextNode] = Field(
        description="Newest first: what earlier attempts did and why they failed"
    )
    next_cursor: str | None = Field(None, description="More, older nodes: warp_work_context with this cursor")
    total: int
    truncated: int = Field(0, description="Nodes on this page whose text was cut to the bound")
    dependencies: list[ContextNode] = Field(
        default_factory=list, description="Results of completed dependencies"
    )
    simplified: bool = Field(
        False,
        description="Your attempt is the item's last: only the essentials of its context are handed "
        "over (older nodes: warp_work_context); keep the approach simple",
    )


class WorkPlaceOut(Out):
    """Where to work on a claimed item when the project has a repository (docs/workstreams.md)."""

    directory: str = Field(description="Work here, and only here: the item's own worktree")
    branch: str = Field(description="The item's branch, checked out in the directory")
    base_ref: str = Field(description="The target branch it was made from")
    base_sha: str = Field(description="The commit of the target it was made from")
    resumed_from: str | None = Field(
        None, description="The checkpoint whose files (uncommitted) the directory starts with"
    )
    review: bool = Field(False, description="A reviewer's worktree: the handed-in commit, detached")


class ClaimOut(Out):
    claimed: bool
    item: WorkItem | None = None
    reason: str | None = None
    review: bool = Field(
        False, description="A review task: judge the item's latest result (warp_work_review)"
    )
    context: HandOffOut | None = Field(None, description="The item's context path (earlier attempts)")
    workstream: WorkPlaceOut | None = Field(None, description="Where to work: the item's worktree and branch")


class WorkListOut(Out):
    items: list[WorkItem]
    next_cursor: str | None = None
    total: int | None = None


class QueueStatusOut(Out):
    depths: dict[str, int] = Field(description="Items waiting or in flight, per capability")
    total: int
    dead_letters: int
    held_by_me: list[str]
    draining: bool
    budget_hold: str | None = Field(
        default=None,
        description="Why claims are refused now (a daily budget reached, or the project paused), if they are",
    )


class DeadLetterOut(Out):
    item: WorkItem
    dlq_seq: int
    dead_lettered_at: datetime


class DlqListOut(Out):
    items: list[DeadLetterOut]
    next_cursor: str | None = None


# -- questions ---------------------------------------------------------------------------

QuestionId = Annotated[str, Field(pattern=_ID, description="A question id: 32 lowercase hex characters")]


class QuestionOut(Out):
    question: Question


class QuestionListOut(Out):
    items: list[Question]
    next_cursor: str | None = None
    total: int | None = None


# -- file leases -------------------------------------------------------------------------

LeaseId = Annotated[str, Field(pattern=_ID, description="A lease id: 32 lowercase hex characters")]
LeasePattern = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        description="A gitignore-style path pattern relative to the repository root (src/api/**, *.md, "
        "./Makefile); as in .gitignore a name without '/' (Makefile, web/) matches at any depth, so "
        "write ./Makefile or web/** for the one at the root; an absolute path inside the repository "
        "is made relative",
    ),
]


class LeaseOut(Out):
    lease: Lease


class LeaseListOut(Out):
    items: list[Lease]
    conflicts: list[dict[str, Any]] = Field(
        default_factory=list, description="With paths given: who holds what overlaps them"
    )


class LeaseReleaseOut(Out):
    released: list[Lease]


# -- context trees ------------------------------------------------------------------------

TreeId = Annotated[str, Field(pattern=_ID, description="A context tree id: 32 lowercase hex")]
NodeId = Annotated[str, Field(pattern=_ID, description="A node id: 32 lowercase hex")]
AsOfSeq = Annotated[
    int | None, Field(ge=1, description="Read the tree as it stood at this stream sequence (a version's seq)")
]
AsOf = Annotated[
    datetime | None, Field(description="Read the tree as it stood at this time (ISO 8601 with a time zone)")
]


class ContextTreeOut(Out):
    tree_id: str
    meta: TreeMeta
    root: ContextNode


class ContextNodeOut(Out):
    tree_id: str
    node: ContextNode


class ContextPathOut(Out):
    tree_id: str
    nodes: list[ContextNode] = Field(description="Root first, each node in its newest version")
    withheld: list[str] = Field(default_factory=list, description="Nodes whose content you may not see")


NodeRefOut = NodeRefView


class ContextStructureOut(Out):
    tree_id: str
    nodes: list[NodeRefOut] = Field(description="Tree order (pre-order), no content")
    next_cursor: str | None = None


ResolvedOut = ResolvedView


class ContextResolveOut(Out):
    tree_id: str
    items: list[ResolvedOut]


class ContextChangeOut(Out):
    seq: int
    node: ContextNode


class ContextChangesOut(Out):
    changes: list[ContextChangeOut]
    next_cursor: str = Field(description="Pass back to get only what changes after")
    withheld: int = 0


class ContextListOut(Out):
    trees: list[TreeEntry] = Field(description="Newest first: threads and created trees you may read")
    next_cursor: str | None = None


class ContextNodeDetailOut(NodeDetail):
    withheld: bool = Field(False, description="Its scope hides its content from you (text and meta left out)")


ContextLeavesOut = LeavesView


class ContextHandlesOut(Out):
    tree_id: str
    handles: list[HandleAt] = Field(description="Root first: each node's id and handle, no content")
    withheld: list[str] = Field(default_factory=list, description="Nodes whose handle you may not see")


class ThreadNodeOut(Out):
    depth: int
    node: ContextNode


class ThreadOut(Out):
    tree_id: str
    meta: TreeMeta
    nodes: list[ThreadNodeOut] = Field(description="Tree order: each reply under the message it answers")
    next_cursor: str | None = None
    withheld: int = 0


class ThreadSummaryOut(Out):
    tree_id: str
    root_seq: int
    title: str
    replies: int
    last_at: datetime | None
    started_by: str


class ThreadListOut(Out):
    channel: str
    threads: list[ThreadSummaryOut]


WorkStatusArg = WorkStatus
ScopeArg = Scope
JsonObject = dict[str, Any]
