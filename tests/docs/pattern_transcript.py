"""docs/pattern.md's tool examples, replayed as one Pattern session.

Under each ``### pattern_<tool>`` heading the docs show calls: the arguments (a JSON
block), then what the tool answered: its text (a plain block) and, when shown, its
structured result (a JSON block). A text that is a tool error is followed by the next
call's arguments. ``pattern_health`` takes no arguments, so its section starts with the
text. The calls are made in the docs' order against a real ``pattern`` server over stdio,
in a fresh project, and each answer is compared with the one shown (masked: ids, times,
dates; an id the docs show stands for the one the session returned in its place; the
project folder ``/repo`` is the session's own).

Two blocks are not calls: the memory shown under "Tools" is compared, key for key, with a
memory the session returned, and the export "File format" with the file the session wrote.
The secret-scanner warning is what ``pattern_remember`` answers for the content its
section names (remembered, then forgotten, so the session's counts stay as shown).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doc_examples import Block
from mcp.client.session import ClientSession
from mcp_client import call, text_of
from transcript import mismatches, shown_json

MEMORY_SHAPE = "A memory in a result looks like"
FILE_FORMAT = '{"format": "loom-pattern-memories"'
SECRET_WARNING = "content: possible connection string with credentials"
SECRET_CONTENT = "connect with postgres://app:hunter22@db/app"
FORGED = "forged.json"


@dataclass
class Call:
    tool: str
    arguments: Block | None
    text: Block | None = None
    structured: Block | None = None


@dataclass
class Outcome:
    """What the replay found for each block: nothing wrong, or what differs."""

    problems: dict[Block, list[str]] = field(default_factory=dict)

    def add(self, block: Block | None, problem: str) -> None:
        if block is not None:
            self.problems.setdefault(block, []).append(problem)


def is_error(text: str) -> bool:
    return text.startswith("Error executing tool")


def calls(blocks: list[Block]) -> list[Call]:
    """The docs' calls, in order, from the blocks under ``### pattern_*`` headings."""
    found: list[Call] = []
    for block in blocks:
        if not block.heading.startswith("pattern_") or block.text.startswith(FILE_FORMAT):
            continue
        last = found[-1] if found and found[-1].tool == block.heading else None
        if block.info == "json":
            if (
                last is not None
                and last.text is not None
                and last.structured is None
                and not is_error(last.text.text)
            ):
                last.structured = block
            else:
                found.append(Call(block.heading, block))
        elif last is not None and last.text is None:
            last.text = block
        else:  # an answer with no arguments shown: a call without any
            found.append(Call(block.heading, None, text=block))
    return found


def masked(text: str, folder: Path) -> str:
    """Whitespace collapsed; what changes from run to run replaced by a mark."""
    text = text.replace("/repo/", f"{folder}/")
    text = re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)
    text = re.sub(r"\b[0-9a-f]{4,31}(?:…|\.\.\.)", "<id>", text)
    text = re.sub(r"\b[0-9a-f]{16}\b", "<user>", text)
    text = re.sub(r"\b[0-9a-f]{8}\b", "<id8>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?Z?", "<time>", text)
    return " ".join(text.split())


def reads_as(said: str, shown: str) -> bool:
    """``…`` in what the docs show stands for anything (the rest of a long message)."""
    parts = re.split(r"…|\.\.\.", shown)
    return re.fullmatch(".*".join(re.escape(p) for p in parts), said) is not None


def learn_ids(shown: str, actual: str, ids: dict[str, str]) -> None:
    """The ids the docs show, in order, stand for the ids the session printed in their place."""
    pattern = r"\b[0-9a-f]{32}\b"
    for doc_id, real_id in zip(re.findall(pattern, shown), re.findall(pattern, actual), strict=False):
        ids.setdefault(doc_id, real_id)


def with_ids(text: str, ids: dict[str, str]) -> str:
    for doc_id, real_id in ids.items():
        text = text.replace(doc_id, real_id)
    return text


def forged_file(folder: Path) -> None:
    """The file the import example reads: two good records from another agent, one with a bad
    category and one without content (what its answer reports)."""
    other = {
        "agent_id": "3f1c2a9d8e7b6a5f4c3d2e1f0a9b8c7d",
        "project_id": "my-app",
        "user_id": "5a4b3c2d1e0f9a8b",
    }
    good = {"scope": "private", "category": "longterm", **other}
    records = [
        {**good, "id": "a" * 32, "content": "Deploys go out on Tuesdays"},
        {**good, "id": "b" * 32, "content": "Run the linter first"},
        {**good, "id": "c" * 32, "category": "someday", "content": "Not a category"},
        good,  # no content
    ]
    exports = folder / ".loom" / "memory-exports"
    exports.mkdir(parents=True, exist_ok=True)
    (exports / FORGED).write_text(
        json.dumps({"format": "loom-pattern-memories", "version": 1, "count": 4, "memories": records})
    )


async def replay(
    session: ClientSession, blocks: list[Block], folder: Path, substitute: Callable[[str], str]
) -> Outcome:
    """Every call of the docs, in order, each answer compared with the one shown;
    ``substitute`` puts the session's ports, folder and user id into what the docs show."""
    outcome = Outcome()
    ids: dict[str, str] = {}
    memory: dict[str, Any] | None = None
    forged_file(folder)
    carried: Call | None = None
    for step in calls(blocks):
        if carried is not None and step.arguments is None and step.tool == carried.tool:
            step.arguments = carried.structured  # the block after a refusal was the next call's
        carried = None
        arguments = json.loads(with_ids(step.arguments.text, ids)) if step.arguments else {}
        result = await session.call_tool(step.tool, arguments)
        if result.is_error and step.structured is not None:
            carried, step.structured = Call(step.tool, None, structured=step.structured), None
        if not result.is_error and result.structured_content is None:
            outcome.add(step.arguments or step.text, f"{step.tool}: no structured result")
            continue
        said = text_of(result)
        if step.text is not None:
            shown_text = substitute(step.text.text.strip())
            # A refusal's text is its message alone (the code travels in _meta), so the docs
            # show it as it reads; only a docs line that says "Error executing tool" insists.
            if is_error(shown_text) and not result.is_error:
                outcome.add(step.text, f"{step.tool}: no error: {said}")
            elif not reads_as(masked(said, folder), masked(shown_text, folder)):
                outcome.add(step.text, f"{step.tool} said:\n{said}\nthe docs show:\n{shown_text}")
            learn_ids(shown_text, said, ids)
        if step.structured is not None and result.structured_content is not None:
            shown = shown_json(substitute(step.structured.text))
            for problem in mismatches(result.structured_content, shown):
                outcome.add(step.structured, f"{step.tool}: {problem}")
        if isinstance((result.structured_content or {}).get("memory"), dict) and memory is None:
            memory = dict(result.structured_content["memory"])  # type: ignore[index]
    await _check_memory_shape(blocks, memory, outcome)
    _check_file_format(blocks, folder, outcome)
    await _check_secret_warning(session, blocks, outcome)
    return outcome


async def _check_memory_shape(blocks: list[Block], memory: dict[str, Any] | None, outcome: Outcome) -> None:
    block = next(b for b in blocks if b.heading == "Tools" and b.info == "json")
    shown = json.loads(block.text)
    if memory is None or set(memory) != set(shown):
        outcome.add(block, f"a memory has the keys {sorted(memory or {})}, the docs show {sorted(shown)}")


def _check_file_format(blocks: list[Block], folder: Path, outcome: Outcome) -> None:
    block = next(b for b in blocks if b.text.startswith(FILE_FORMAT))
    written = json.loads((folder / ".loom" / "memory-exports" / "backup.json").read_text())
    shown = shown_json(block.text)
    written["memories"] = written["memories"][: len(shown["memories"])]  # the docs show the first
    for problem in mismatches(written, shown, unchecked=("content", "category", "priority", "tags", "count")):
        outcome.add(block, f"the export file: {problem}")


async def _check_secret_warning(session: ClientSession, blocks: list[Block], outcome: Outcome) -> None:
    block = next(b for b in blocks if b.text.startswith(SECRET_WARNING))
    stored = await call(session, "pattern_remember", {"content": SECRET_CONTENT})
    await call(session, "pattern_forget", {"memory_id": stored["memory"]["id"]})
    if [" ".join(w.split()) for w in stored["warnings"]] != [" ".join(block.text.split())]:
        outcome.add(block, f"pattern_remember warned {stored['warnings']}")
