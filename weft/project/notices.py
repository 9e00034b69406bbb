"""What a sweep announces about a project so people hear of it (docs/operator.md):
bottlenecks (``work.bottleneck``), silence by role (``work.silent``) and daily budgets
reached (``project.budget-held``); the notification sinks turn each event into a notice
(``weft/notify/rules.py``).

Each is announced once: this replica remembers what it announced, and replicas announcing
the same thing a moment apart make one event (its message id names it).
"""

from __future__ import annotations

from shared.events import publish_event
from shared.limits import PRIORITY_MAX
from shared.models import WorkStatus, utcnow
from shared.usage.rules import day_of, project_hold, target_hold
from shared.work.silence import silent
from weft.project.hub import ProjectContext


async def announce_bottlenecks(context: ProjectContext) -> int:
    """Open items newly holding up the policy's ``bottleneck_dependents`` open items are
    announced (``work.bottleneck``, a notice); the gauge counts them all. Replicas sending
    the same announcement a moment apart make one event (its message id)."""
    # A count over the in-memory copy first: the policy is read only if some item holds up others.
    found = context.work.bottlenecks(1)
    boost = False
    if found:
        policy = await context.questions.autonomy.current()
        boost = policy.bottleneck_boost
        found = {work_id: n for work_id, n in found.items() if n >= policy.bottleneck_dependents}
    context.metrics.bottlenecks.labels(context.project_id).set(len(found))
    new = [work_id for work_id in found if work_id not in context.bottlenecks_announced]
    items = context.work.by_id() if new else {}
    for work_id in new:
        item = items[work_id]
        if boost:  # the next claim; routing starts an agent for it when none is free
            item = await context.queue.prioritize(work_id, PRIORITY_MAX, "bottleneck") or item
        data = {"item": item.model_dump(mode="json"), "held_up": found[work_id]}
        await publish_event(
            context.js, context.names, "work", "bottleneck", work_id, data, msg_id=f"bottleneck.{work_id}"
        )
    context.bottlenecks_announced = set(found)
    return len(new)


async def announce_silence(context: ProjectContext) -> int:
    """Items whose worker or reviewer said nothing for longer than the autonomy policy
    allows (``work_silence_s``, ``review_silence_s``), each stretch of silence once."""
    held = [
        i
        for i in context.work.by_id().values()
        if i.status in (WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS, WorkStatus.REVIEWING)
    ]
    if not held:
        context.silence_announced.clear()
        return 0
    policy = await context.questions.autonomy.current()
    found = silent(held, utcnow(), policy.work_silence_s, policy.review_silence_s)
    stretches = {(item.id, since.isoformat()) for item, since in found}
    new = 0
    for item, since in found:
        key = (item.id, since.isoformat())
        if key in context.silence_announced:
            continue
        role = "review" if item.status is WorkStatus.REVIEWING else "work"
        data = {"item": item.model_dump(mode="json"), "since": since.isoformat(), "role": role}
        msg_id = f"silent.{item.id}.{since.isoformat()}"
        await publish_event(context.js, context.names, "work", "silent", item.id, data, msg_id=msg_id)
        new += 1
    context.silence_announced = stretches
    return new


async def announce_holds(context: ProjectContext) -> int:
    """Daily budgets (the project's, each target's) reached today, each once a day: new
    claims wait on them until the next UTC day, which nobody would learn of otherwise
    until they wonder why the fleet stopped. Reads usage only when a budget is set."""
    doc = await context.ledger.budgets()
    if doc.project_daily is None and not doc.target_daily:
        context.holds_announced.clear()
        return 0
    now = utcnow()
    day = day_of(now)
    held: dict[str, dict[str, str | None]] = {}
    if doc.project_daily is not None:
        hold = project_hold(doc, await context.ledger.day_totals(day), now)
        if hold is not None:
            held[f"project..{day}"] = {
                "scope": "project",
                "target_id": None,
                "reason": hold.reason,
                "until": hold.until.isoformat() if hold.until else None,
            }
    targets = {t.id: t for t in context.targets.all()} if doc.target_daily else {}
    for target_id in doc.target_daily:
        hold = target_hold(doc, target_id, await context.ledger.day_totals(day, target_id), now)
        if hold is not None:
            target = targets.get(target_id)
            held[f"target.{target_id}.{day}"] = {
                "scope": "target",
                "target_id": target_id,
                "target_name": target.name if target is not None else None,
                "reason": hold.reason,
                "until": hold.until.isoformat() if hold.until else None,
            }
    new = 0
    for key, data in held.items():
        if key in context.holds_announced:
            continue
        subject = data["target_id"] or context.project_id
        await publish_event(
            context.js,
            context.names,
            "project",
            "budget-held",
            subject,
            dict(data),
            msg_id=f"budget-held.{key}",
        )
        new += 1
    context.holds_announced = set(held)
    return new
