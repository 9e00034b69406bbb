"""What ``weft serve``'s terminal tells the person who started it: the fleet's moments as they
happen (an agent started, with where its output goes; it joined; work completed or
dead-lettered; an agent asks a question, with the line that answers it; an agent stopped),
one line each, from the events every project already publishes.

Attached only to the serving command's Weft (``WeftSettings.banner``): a Weft embedded in a
test or a replica behind a load balancer logs what it always did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Final

from shared.tasks import stop_task
from shared.text import answer_command, one_line

if TYPE_CHECKING:
    from weft.project.hub import Attach, ProjectContext
    from weft.project.relay import Listener

log = logging.getLogger("loom.weft.fleet")

NARRATE_EXTENSION: Final = "narrate"
KINDS = frozenset({"work", "spinup", "question"})
TEXT_MAX = 160


def _cut(text: object, most: int = TEXT_MAX) -> str:
    return one_line(text, most)


def _work(item: dict[str, Any]) -> str:
    return f"{item.get('task_id') or str(item.get('id', ''))[:12]} ({_cut(item.get('description'), 60)})"


def line_of(kind: str, action: str, event: dict[str, Any], project_id: str) -> str | None:
    """The terminal's line for one event, or None for the events a person need not watch."""
    data = event.get("data") or {}
    where = f"[{project_id}] "
    if kind == "spinup":
        op = data.get("operation") or {}
        target = op.get("target_name") or data.get("target") or "?"
        if action == "running":
            output = (op.get("handle") or {}).get("stdout_log")
            seen = f"; its output: {output}" if output else ""
            return f"{where}starting an agent on target {target}{seen}"
        if action == "registered":
            return (
                f"{where}agent {data.get('handle_name') or op.get('agent_id', '?')} joined (target {target})"
            )
        if action == "stopped":
            why = data.get("reason") or op.get("shutdown_reason") or "stopped"
            return f"{where}agent on target {target} stopped: {_cut(why, 100)}"
        if action == "stop-failed":
            return f"{where}agent on target {target} could not be stopped: {_cut(data.get('note'), 100)}"
        return None
    if kind == "work":
        item = data.get("item") or {}
        if action == "completed":
            return f"{where}work {_work(item)} completed"
        if action == "dead-lettered":
            return f"{where}work {_work(item)} dead-lettered: {_cut(item.get('error'), 100)}"
        return None
    if kind == "question" and action == "asked":
        question = data.get("question") or {}
        who = question.get("asked_by_handle") or str(question.get("asked_by", ""))[:8]
        choices = question.get("choices") or []
        return (
            f"{where}{who} asks ({question.get('priority', '')}): {_cut(question.get('question'))} "
            f"- answer with: {answer_command(str(question.get('id', '')), choices)}"
        )
    return None


class Narrator:
    """One served project's narration: a relay listener and the task that logs its lines."""

    def __init__(self, project: ProjectContext) -> None:
        self.project = project
        self._listener: Listener = project.relay.listen(lambda kind: kind in KINDS)
        self._task = asyncio.create_task(self._run(), name=f"narrate:{project.project_id}")

    async def _run(self) -> None:
        while True:
            relayed = await self._listener.queue.get()
            with contextlib.suppress(Exception):  # a line is never worth a crash
                line = line_of(relayed.kind, relayed.action, relayed.event, self.project.project_id)
                if line is not None:
                    log.info("%s", line)

    def busy(self) -> bool:
        return False

    async def stop(self) -> None:
        self.project.relay.unlisten(self._listener)
        await stop_task(self._task)


def narrate_attach() -> Attach:
    """The hook that attaches a :class:`Narrator` to each project ``weft serve`` serves."""

    async def attach(project: ProjectContext) -> Narrator:
        return Narrator(project)

    return attach
