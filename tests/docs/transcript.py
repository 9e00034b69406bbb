"""Reading a documentation block as a transcript: the commands in it, the output shown
after each, and comparing that output with what the command really printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMMAND_WORDS = ("curl", "shuttle", "weft", "warp", "pattern", "make", "echo", "export", ".venv/bin/")
HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")
SHORT_ID = re.compile(r"\b[0-9a-f]{4,31}(?:\.\.\.|…)")
ANY = "<<any>>"
"""A shown value that stands for anything (``"..."``, ``{...}``, ``{Event}``)."""
PREFIX = "<<prefix>>"
"""A shown id cut short (``"5c1f..."``): any string (ids differ from run to run)."""
LIKE = "<<like>>"
"""A shown string with an elision inside (``"... (allowed: ...)"``): the rest must be there."""


@dataclass
class Command:
    line: str
    """The command as written (continuation lines joined by newlines)."""
    output: list[str] = field(default_factory=list)
    """The lines shown after it, before the next command."""


def complete(command: str) -> bool:
    """Does ``command`` end here (quotes closed, no trailing backslash)?"""
    if command.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def commands(text: str) -> list[Command]:
    """The commands of a block and the output shown after each. With ``$ `` prompts, those
    lines are the commands; otherwise lines starting with one of :data:`COMMAND_WORDS`."""
    lines = text.splitlines()
    prompted = any(line.startswith("$ ") for line in lines)
    found: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        starts = line.startswith("$ ") if prompted else line.lstrip().startswith(COMMAND_WORDS)
        if not starts:
            if found and line.strip():
                found[-1].output.append(line)
            i += 1
            continue
        command = line[2:] if prompted else line
        while not complete(command) and i + 1 < len(lines):
            i += 1
            command += "\n" + lines[i]
        found.append(Command(command))
        i += 1
    return found


def run_shell(
    command: str, env: Mapping[str, str], cwd: Path, *, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """One command line, by bash, as a reader's shell would run it: read from stdin, so bash
    stays the command's parent as in a terminal (``bash -c`` would exec a lone command, and
    a CLI that looks for its shell among its ancestors, as ``shuttle --install-completion``
    does, found none when ``make test`` was started outside a shell, e.g. by ``nohup``)."""
    return subprocess.run(
        ["bash", "-o", "pipefail", "-s"],
        input=command,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- shown JSON --------------------------------------------------------------------------
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
ELLIPSIS = r"(?:\.\.\.|…)"


def shown_json(text: str) -> Any:
    """Parse JSON as the docs show it, with its elisions: ``...``/``…`` for "more" or "any",
    ``"5c1f..."`` for an id cut short, ``{Event}`` for a documented shape."""
    strings: list[str] = []

    def keep(match: re.Match[str]) -> str:
        strings.append(_shown_string(match[0]))
        return f"\x01{len(strings) - 1}\x01"

    t = STRING.sub(keep, text.strip())  # the elisions below are those outside strings
    t = re.sub(rf"\{{\s*(?:{ELLIPSIS}|[A-Z][A-Za-z]*)\s*\}}", json.dumps(ANY), t)  # {...} {Event}
    t = re.sub(rf"\[\s*{ELLIPSIS}\s*\]", json.dumps(ANY), t)
    t = re.sub(rf",\s*{ELLIPSIS}\s*(?=,)", "", t)  # a, …, b
    t = re.sub(rf",\s*{ELLIPSIS}\s*(?=[}}\]])", "", t)  # a, …}
    t = re.sub(rf"(?<=[{{\[])\s*{ELLIPSIS}\s*,?", "", t)  # {…, a} {…a…}
    t = re.sub(rf"\s*{ELLIPSIS}\s*(?=[}}\]])", "", t)
    return json.loads(re.sub(r"\x01(\d+)\x01", lambda m: strings[int(m[1])], t))


def _shown_string(literal: str) -> str:
    """A string as shown: ``"..."`` any value, ``"5c1f..."`` an id cut short (any string),
    ``"a ... b"`` a string with that elided (:data:`LIKE`)."""
    inner = literal[1:-1]
    if re.fullmatch(ELLIPSIS, inner):
        return json.dumps(ANY)
    if re.fullmatch(rf"[0-9a-f]*{ELLIPSIS}", inner):
        return json.dumps(PREFIX + inner)
    if re.search(ELLIPSIS, inner):
        return json.dumps(LIKE + inner)
    return literal


def like(pattern: str, text: str) -> bool:
    """Does ``text`` read as ``pattern``, where ``...``/``…`` in the pattern stand for anything?"""
    parts = re.split(r"\.\.\.|…", json.loads(f'"{pattern}"'))
    return re.fullmatch(".*".join(re.escape(p) for p in parts), text, re.S) is not None


ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def mismatches(actual: Any, shown: Any, unchecked: Iterable[str] = (), path: str = "$") -> list[str]:
    """Where ``actual`` differs from what the docs show. Objects: every shown key must be
    there (more keys are fine: the docs abbreviate); ids and times match any id and time;
    keys in ``unchecked`` only need to be present."""
    skip = frozenset(unchecked)
    if shown == ANY:
        return []
    if isinstance(shown, str) and shown.startswith(PREFIX):
        return [] if isinstance(actual, str) else [f"{path}: expected a string, got {actual!r}"]
    if isinstance(shown, str) and shown.startswith(LIKE):
        pattern = shown.removeprefix(LIKE)
        ok = isinstance(actual, str) and like(pattern, actual)
        return [] if ok else [f"{path}: {actual!r}, the docs show {pattern!r}"]
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {type(actual).__name__}"]
        problems = []
        for key, value in shown.items():
            if key not in actual:
                problems.append(f"{path}.{key}: missing")
            elif key not in skip:
                problems += mismatches(actual[key], value, skip, f"{path}.{key}")
        return problems
    if isinstance(shown, list):
        if not isinstance(actual, list):
            return [f"{path}: expected a list, got {type(actual).__name__}"]
        if shown == [ANY]:  # [{...}]: a list of such things
            return []
        if len(actual) != len(shown):
            return [f"{path}: {len(actual)} entries, the docs show {len(shown)}"]
        pairs = enumerate(zip(actual, shown, strict=True))
        return [p for i, (a, s) in pairs for p in mismatches(a, s, skip, f"{path}[{i}]")]
    if isinstance(shown, str) and isinstance(actual, str):
        if HEX_ID.fullmatch(shown) and HEX_ID.fullmatch(actual):
            return []
        if ISO_TIME.match(shown) and ISO_TIME.match(actual):
            return []
    return [] if actual == shown else [f"{path}: {actual!r}, the docs show {shown!r}"]


# -- shown text --------------------------------------------------------------------------
def normalized(text: str) -> list[str]:
    """Output lines with what changes from run to run masked: ids (whole or cut short),
    clock times, ages, generated task ids; runs of spaces and of table rules collapsed."""
    lines = []
    for line in text.splitlines():
        line = HEX_ID.sub("<id>", line)
        line = SHORT_ID.sub("<id>", line)
        line = re.sub(r"\bshuttle-[0-9a-f]{12}\b", "<task>", line)
        line = re.sub(r"\b\d\d:\d\d:\d\d\b", "<time>", line)
        line = re.sub(r"\b\d+[smhd] ago\b", "<ago>", line)
        line = re.sub(r"([━─═])\1+", r"\1", line)
        line = re.sub(r" {2,}", " ", line).rstrip()
        if line.strip():
            lines.append(line)
    return lines
