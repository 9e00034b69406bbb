"""Following one work item to a final state (``watch`` and ``submit --wait``).

Subscribe first, then read the item, so no transition can fall between the
two; while the stream is quiet the item is re-read now and then, so a missed
event cannot leave the follower waiting forever.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from loom.errors import ClientError, WatchTimedOut
from loom.events import item_changes
from loom.transport import WeftClient, seg
from shuttle.app import Out
from shuttle.errors import OutcomeFailed
from shuttle.output import console, escape, parse_time, styled
from shuttle.views import FINAL_WORK_STATES, SUCCESS_STATE, answer_line, progress_text, work_heading

RECHECK_S = 5.0


def _line(kind: str, item: dict[str, Any], event: dict[str, Any] | None, o: Out) -> None:
    """One human line, or one JSON line per event with ``--json`` (NDJSON)."""
    data = dict(event.get("data") or {}) if event else {}
    data.pop("item", None)
    if o.json:
        record = {
            "type": kind,
            "at": (event or {}).get("at") or item.get("updated_at"),
            "work_id": item.get("id"),
            "status": item.get("status"),
            "data": data,
            "item": item,
        }
        sys.stdout.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
        return
    if o.quiet:
        return
    moment = parse_time((event or {}).get("at") or item.get("updated_at"))
    clock = moment.astimezone().strftime("%H:%M:%S") if moment else "--:--:--"
    detail = ""
    if kind.endswith(".claimed") and item.get("assigned_to"):
        detail = (
            f"by {item['assigned_to']} (attempt {item.get('attempts', '?')}/{item.get('max_attempts', '?')})"
        )
    elif kind.endswith(".progress"):
        detail = progress_text(item)
    elif kind.endswith(".waiting"):
        detail = str(data.get("reason") or item.get("waiting_reason") or "")
    elif kind.endswith(".failed") or item.get("status") == "dead-lettered":
        detail = str(data.get("error") or item.get("error") or "")
    elif kind.endswith(".completed") and item.get("result") is not None:
        detail = f"result: {json.dumps(item['result'], ensure_ascii=False, default=str)[:200]}"
    elif kind.endswith(".cancelled") and data.get("reason"):
        detail = f"reason: {data['reason']}"
    elif kind.endswith((".review-claimed", ".in-review")) and data.get("agent_id"):
        detail = f"round {data.get('round', '?')} by {data['agent_id']}"
    elif kind.endswith((".approved", ".rejected")):
        said = f": {data['feedback']}" if data.get("feedback") else ""
        detail = f"round {data.get('round', '?')} by {data.get('agent_id', '?')}{said}"
    elif kind.endswith((".waiting-on-operator", ".resumed")) and data.get("question_id"):
        detail = f"question {data['question_id']}"
    elif kind.endswith((".unblocked", ".revived")) and data.get("dependency"):
        detail = f"dependency {data['dependency']}"
    elif kind == "snapshot" and item.get("status") == "blocked" and item.get("blocked_on"):
        detail = f"waits for {len(item['blocked_on'])} item(s) to complete first"
    # one line per event, never broken by Shuttle (the terminal wraps a long one)
    console().print(
        f"{clock}  {escape(kind):<22} {styled(item.get('status'))}  {escape(detail)}", soft_wrap=True
    )


def _say_below(text: str, o: Out) -> None:
    """A line under the event's, indented to its detail column."""
    if not (o.json or o.quiet):
        console().print(f"{'':10}{escape(text)}", soft_wrap=True)


def _ask_operator(client: WeftClient, question_id: str, o: Out) -> None:
    """The question the item waits on, whole, and the exact line that answers it."""
    if o.json or o.quiet:
        return
    try:
        question = client.get(f"/api/questions/{seg(question_id)}")
    except ClientError:
        question = {}
    asked = question.get("question") or "(the question could not be read; shuttle questions lists it)"
    _say_below(f"the agent asks: {asked}", o)
    if question.get("choices"):
        _say_below(f"choices: {' | '.join(question['choices'])}", o)
    _say_below(f"answer with:  {answer_line(question_id, question.get('choices'))}", o)


def follow(client: WeftClient, work_id: str, o: Out, *, timeout: float | None = None) -> dict[str, Any]:
    """Print the item's transitions until it is final; return the final item.
    Raises :class:`OutcomeFailed` for any ending but completed, or on timeout."""
    item: dict[str, Any] = {}
    try:
        for kind, item, event in item_changes(
            client, work_id, final=FINAL_WORK_STATES, recheck_s=RECHECK_S, timeout=timeout
        ):
            if kind == "snapshot" and not (o.json or o.quiet):
                console().print(work_heading(item))
            _line(kind, item, event, o)
            if kind == "snapshot" and item.get("status") == "queued" and item.get("waiting_reason"):
                _say_below(str(item["waiting_reason"]), o)  # why no agent has it (Weft's routing knows)
            asked = kind == "snapshot" or kind.endswith(".waiting-on-operator")
            if asked and item.get("status") == "waiting-on-operator" and item.get("question_id"):
                _ask_operator(client, str(item["question_id"]), o)
    except WatchTimedOut as exc:
        raise OutcomeFailed(f"{exc.message} (stopped watching)") from None
    status = item.get("status")
    if status != SUCCESS_STATE:
        reason = item.get("error") or ""
        raise OutcomeFailed(
            f"work {item.get('id', work_id)} ended {status}" + (f": {reason}" if reason else "")
        )
    return item
