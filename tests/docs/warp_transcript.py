"""docs/warp.md's tool transcripts (``→ tool {arguments}``, ``← {result}``, ``← error: ...``)
read as calls, to hold them against the tools a real Warp publishes (``tools/list``).

They are not replayed: they follow two agents (alice, and bob who claims and reads what
alice sent) through states one session cannot show in order (a Warp not yet on NATS).
What is checked: every tool named exists; a call shown with a result passes only
arguments the tool's input schema has, and all it requires; every field of a shown result
is in the tool's output schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from transcript import shown_json


@dataclass
class Shown:
    tool: str
    arguments: dict[str, Any]
    results: list[Any] = field(default_factory=list)
    refused: bool = False


def balanced(text: str) -> bool:
    """Are the JSON braces and brackets in ``text`` closed (strings aside)?"""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped = char == "\\" and not escaped
            if char == '"' and not escaped:
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth <= 0


def _json_part(text: str) -> str:
    """The JSON at the start of ``text``, without a trailing ``(comment)``."""
    return re.sub(r"(?<=[}\]])\s+\(.*$", "", text.strip(), flags=re.S)


def calls(text: str) -> list[Shown]:
    lines = text.splitlines()
    found: list[Shown] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("→ "):
            tool, _, rest = line[2:].partition(" ")
            while not balanced(rest.split("  (")[0]) and i + 1 < len(lines):
                i += 1
                rest += "\n" + lines[i]
            found.append(Shown(tool, json.loads(_json_part(rest) or "{}")))
        elif line.startswith("← ") and found:
            rest = line[2:]
            if rest.startswith("error:"):
                found[-1].refused = True
            elif rest.startswith("{"):
                while not balanced(rest.split("  (")[0]) and i + 1 < len(lines):
                    i += 1
                    rest += "\n" + lines[i]
                found[-1].results.append(shown_json(_json_part(rest)))
        i += 1
    return found


def problems(shown: list[Shown], tools: dict[str, Any]) -> list[str]:
    """Where the transcript and the published tools disagree."""
    found = []
    for call in shown:
        tool = tools.get(call.tool)
        if tool is None:
            found.append(f"{call.tool}: no such tool")
            continue
        properties = set(tool.input_schema.get("properties", {}))
        unknown = set(call.arguments) - properties
        if unknown:
            found.append(f"{call.tool}: no argument {sorted(unknown)} (it takes {sorted(properties)})")
        missing = set(tool.input_schema.get("required", [])) - set(call.arguments)
        if missing and not call.refused:
            found.append(f"{call.tool}: {sorted(missing)} required")
        fields = set((tool.output_schema or {}).get("properties", {}))
        for result in call.results:
            extra = set(result) - fields if isinstance(result, dict) else set()
            if extra:
                found.append(f"{call.tool}: its result has no {sorted(extra)} (it has {sorted(fields)})")
    return found
