"""Every work item's context tree: what each transition adds, and what a claim hands over
(docs/context.md, Hand-offs through work).

The tree of an item has the item's id as its id. Its root is the submission; each
attempt is a branch from the root (``attempt`` node, made by the claim), and what
happens in an attempt (progress notes, the result, the failure and its error, a lapsed
claim) is appended under that attempt's node. Agents add their own notes there too
(the claim tells them the attempt node). Operator moves (dead-letter, cancel, expire,
retry) are appended under the root.

:func:`work_nodes` is pure: one transition's event (the same ``work.<action>`` the
lifecycle publishes, see ``shared/work/queue.py``) to the nodes it adds. Node ids are derived
from the transition, and parents from the item (root and attempt ids are derived
too), so recording needs no read of the tree and a repeated publish stores one copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from shared.context.reads import hand_off
from shared.context.store import ContextStore
from shared.context.trees import (
    HANDOFF_CHARS,
    HANDOFF_NODE_CHARS,
    HANDOFF_NODES,
    MAX_TEXT,
    ContextHandle,
    ContextNode,
    HandleSource,
    TreeMeta,
    derive_id,
    work_attempt_id,
    work_root_id,
)
from shared.models import WorkItem

UNKNOWN_AUTHOR: Final = "unknown"
SYSTEM_AUTHOR: Final = "loom"


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _said(value: object) -> str | None:
    """A node's text from an event's field: None when there is nothing to say, cut to fit."""
    text = str(value or "")
    return _cut(text) if text else None


def _result_text(item: WorkItem) -> str | None:
    return None if item.result is None else _cut(json.dumps(item.result, default=str))


def _author(agent: object) -> str:
    return agent if isinstance(agent, str) and agent else SYSTEM_AUTHOR


def _node(item: WorkItem, action: str, parent: str, author: str, kind: str, **fields: Any) -> ContextNode:
    return ContextNode(
        id=derive_id("work-node", item.id, action, item.attempts, item.updated_at.isoformat()),
        tree_id=item.id,
        parent_id=parent,
        kind=kind,
        author=author,
        scope=item.scope,
        at=item.updated_at,
        **fields,
    )


def work_nodes(action: str, item: WorkItem, data: Mapping[str, Any]) -> list[ContextNode]:
    """The context nodes one ``work.<action>`` transition adds to the item's tree."""
    root = work_root_id(item.id)
    attempt = work_attempt_id(item.id, item.attempts)
    work = ContextHandle(source=HandleSource.WORK, id=item.id)
    if action == "submitted":
        meta = TreeMeta(kind="work", title=_cut(item.task_id, 200), ref={"work_id": item.id})
        return [
            ContextNode(
                id=root,
                tree_id=item.id,
                kind="submission",
                handle=work,
                author=_author(item.submitted_by) if item.submitted_by else UNKNOWN_AUTHOR,
                scope=item.scope,
                at=item.created_at,
                text=item.description,
                meta={
                    "capability": item.capability,
                    "priority": str(item.priority),
                    "status": item.status.value,
                },
                tree=meta,
            )
        ]
    if action == "claimed":
        return [
            ContextNode(
                id=attempt,
                tree_id=item.id,
                parent_id=root,
                kind="attempt",
                handle=work,
                author=_author(data.get("agent_id")),
                scope=item.scope,
                at=item.claimed_at or item.updated_at,
                meta={"attempt": str(item.attempts)},
            )
        ]
    agent = _author(data.get("agent_id"))
    if action == "progress":
        percent = {"percent": str(data.get("percent", ""))}
        note = str(data.get("note") or "") or None
        return [_node(item, action, attempt, agent, "progress", text=note, meta=percent)]
    if action == "completed":
        return [_node(item, action, attempt, agent, "result", text=_result_text(item))]
    if action == "failed":
        # An agent's failed attempt goes under that attempt; a blocked item failed by its
        # dependency never had one, so its failure goes under the root.
        parent = attempt if data.get("agent_id") and item.attempts else root
        return [_node(item, action, parent, agent, "failure", text=_cut(str(data.get("error") or "")))]
    if action == "in-review":
        facts: dict[str, str] = {"review_round": str(item.review_round)}
        return [_node(item, action, attempt, agent, "handed_in", text=_result_text(item), meta=facts)]
    if action in ("approved", "rejected"):
        verdict = item.reviews[-1] if item.reviews else None
        facts = {
            "verdict": "approve" if action == "approved" else "reject",
            "review_round": str(data.get("round", "")),
        }
        if data.get("score") is not None:
            facts["score"] = str(data["score"])
        if data.get("final"):
            facts["final"] = "true"
        feedback = _said(data.get("feedback") or (verdict.feedback if verdict else ""))
        return [_node(item, action, attempt, agent, "review", text=feedback, meta=facts)]
    if action == "waiting-on-operator":
        facts = {"question_id": str(data.get("question_id", ""))}
        return [_node(item, action, attempt, agent, "question", text=_said(data.get("question")), meta=facts)]
    if action == "resumed":
        facts = {
            "question_id": str(data.get("question_id", "")),
            "answered": "true" if data.get("answered") else "false",
        }
        answer = _said(data.get("answer"))
        # who answered, as the agent was told it (the operator's --by, the policy); an expiry: loom
        by = _author(data.get("by") if data.get("answered") else None)
        return [_node(item, action, attempt, by, "answer", text=answer, meta=facts)]
    if action == "redelivered":
        lapsed = int(data.get("attempt") or 0)
        node = _node(
            item,
            action,
            work_attempt_id(item.id, lapsed),
            _author(data.get("previous_agent")),
            "failure",
            text=item.error,
            meta={"lapsed": "true"},
        )
        return [node]
    if action == "workstream":
        return [_workstream_node(item, attempt, agent, data)]
    if action == "unblocked":  # its last dependency completed: it queues now
        facts = {"dependency": str(data.get("dependency") or "")}
        return [_node(item, action, root, SYSTEM_AUTHOR, "unblocked", meta=facts)]
    if action == "cancelled":
        parent = attempt if item.assigned_to and item.attempts else root
        return [_node(item, action, parent, SYSTEM_AUTHOR, "cancelled", text=item.error)]
    if action in ("dead-lettered", "expired", "retried"):
        return [_node(item, action, root, SYSTEM_AUTHOR, action.replace("-", "_"), text=item.error)]
    return []


def _workstream_node(item: WorkItem, attempt: str, agent: str, data: Mapping[str, Any]) -> ContextNode:
    """What happened to the item's code (docs/workstreams.md), said for the next agent."""
    step = str(data.get("step") or "")
    branch = str(data.get("branch") or "")
    sha = str(data.get("checkpoint") or data.get("head_sha") or "")
    texts = {
        "opened": f"Works on branch {branch}, made from {data.get('base', '')}.",
        "resumed": f"Carries on with branch {branch} from checkpoint {sha[:12]}: the previous "
        "attempt's files as they were, uncommitted work included.",
        "checkpoint": f"Checkpoint {sha[:12]} of branch {branch}'s worktree.",
        "handed-in": f"Handed in branch {branch} at {sha[:12]} (pushed).",
        "restore": f"The operator chose checkpoint {sha[:12]} for the next attempt.",
    }
    meta = {"step": step, "branch": branch, **({"sha": sha} if sha else {})}
    parent = attempt if item.attempts else work_root_id(item.id)
    author = SYSTEM_AUTHOR if step == "restore" else agent
    return _node(item, "workstream", parent, author, "workstream", text=texts.get(step), meta=meta)


def dependency_ids(item: WorkItem) -> list[str]:
    """The items whose results this one's hand-off includes: the ones it depends on (an item
    is only offered once every one of them has completed)."""
    return list(item.depends_on)


@dataclass
class WorkHandOff:
    """What a claim carries: the item's tree, newest first and bounded."""

    tree_id: str
    attempt_node: str
    """Append your notes under this node (``warp_context_append``)."""
    nodes: list[ContextNode]
    next_cursor: str | None
    total: int
    truncated: int
    dependencies: list[ContextNode] = field(default_factory=list)
    """The results of the item's completed dependencies (see :func:`dependency_ids`)."""
    simplified: bool = False
    """Cut to the essentials: the item's last attempt (``WorkItem.simplify``)."""


SIMPLIFIED_NODES: Final = 5
SIMPLIFIED_CHARS: Final = HANDOFF_CHARS // 4
SIMPLIFIED_NODE_CHARS: Final = HANDOFF_NODE_CHARS // 2


async def work_hand_off(
    store: ContextStore,
    item: WorkItem,
    *,
    limit: int = HANDOFF_NODES,
    cursor: str | None = None,
    simplified: bool = False,
) -> WorkHandOff:
    """The context an agent taking ``item`` should see: what earlier attempts did and why
    they failed, newest first, with a cursor for more. ``simplified`` (an item's last
    attempt, docs/operator.md, Escalation): a quarter of the usual budget, the newest
    few nodes, each cut shorter; the rest stays readable through the cursor."""
    state = await store.tree(item.id)
    if simplified:
        page = hand_off(
            state,
            limit=min(limit, SIMPLIFIED_NODES),
            max_chars=SIMPLIFIED_CHARS,
            node_chars=SIMPLIFIED_NODE_CHARS,
            cursor=cursor,
        )
    else:
        page = hand_off(state, limit=limit, cursor=cursor)
    results: list[ContextNode] = []
    for dependency in dependency_ids(item):
        done = await store.tree(dependency)
        final = next((n for n in (done.latest(f) for f in done.newest_first()) if n.kind == "result"), None)
        if final is not None:  # the result that counted (a reviewed item's approved one)
            results.append(final)
    return WorkHandOff(
        tree_id=item.id,
        attempt_node=work_attempt_id(item.id, item.attempts),
        nodes=page.nodes,
        next_cursor=page.next_cursor,
        total=page.total,
        truncated=page.truncated,
        dependencies=results,
        simplified=simplified,
    )
