"""Rejected input is never echoed back by Shuttle (issue 21, defect 2).

Every value-taking option and argument of every command (taken from the Typer app,
so a new one is covered without editing this file) gets a secret-looking value,
against a real Weft: whenever Shuttle or Weft refuses it, the value appears
neither on stdout nor on stderr.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from shuttle_helpers import Cli

from shuttle.cli import app

SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="
"""Looks like a credential; breaks every name, id, number, URL, path and KEY=VALUE rule."""
HEX = "0" * 32
POSITIONAL: dict[str, str | list[str]] = {
    "work_id": HEX,
    "work_ids": HEX,
    "tree_id": HEX,
    "agent_id": HEX,
    "agent_ids": HEX,
    "target": "probe",
    "description": "do it",
    "name": "probe-new",
    "key": "timeout",
    "value": "5",
    "question_id": HEX,
    "question_ids": HEX,
    "pairs": [HEX, "yes"],
    "path": "/nonexistent/policy.yaml",
    "answer": "yes",
    "url": "/srv/app.git",
    "checkpoint": "abcd1234",
}
EXTRA = {("submit",): ["-c", "code"], ("config", "get"): [], ("config", "unset"): []}

# Values Shuttle and Weft accept as given: free text, a file Shuttle reads if it exists
# (none does), a name it stores. Accepting is not echoing rejected input.
ACCEPTED = {
    ("--config",),  # a config file that does not exist means "no file"
    ("submit", "description"),
    ("submit", "--task-id"),
    ("agents", "shutdown", "--reason"),
    ("work", "cancel", "--reason"),
    ("targets", "add", "--tag"),
    ("targets", "update", "--tag"),
    ("targets", "add", "--command"),
    ("targets", "update", "--command"),
    ("targets", "add", "--user"),
    ("targets", "update", "--user"),
    ("targets", "add", "--body"),
    ("targets", "update", "--body"),
    ("targets", "add", "--image"),
    ("repo", "set", "--target"),  # a valid branch name for git, stored as given
    ("repo", "set", "--worktree-root"),  # a relative path, stored as given
    ("repo", "set", "--gate"),  # any text is a valid argument of the gate command
    ("project", "pause", "--reason"),  # free text, shown to agents
}


def _mechanism(help_text: str | None) -> str:
    found = re.match(r"\[([a-z-]+)", help_text or "")
    return found.group(1) if found else "local"


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def cases() -> list[tuple[tuple[str, ...], list[str]]]:
    """(case id, argv) for every value-taking parameter of every command."""
    root = typer.main.get_command(app)
    found: list[tuple[tuple[str, ...], list[str]]] = []
    for param in root.params:
        if param.opts[0].startswith("--") and not getattr(param, "is_flag", False) and param.expose_value:
            found.append(((param.opts[0],), [param.opts[0], SECRET, "stats"]))
    for path, command in _commands(root):
        arguments = [p for p in command.params if type(p).__name__.endswith("Argument")]
        for param in command.params:
            if getattr(param, "is_flag", False) or param.name in ("json", "quiet"):
                continue
            is_argument = param in arguments
            argv = [*path]
            for arg in arguments:
                given = SECRET if arg is param else POSITIONAL[str(arg.name)]
                argv += given if isinstance(given, list) else [given]
            if path == ("targets", "add"):
                argv += ["-m", _mechanism(param.help)] if param.name != "mechanism" else []
            argv += EXTRA.get(path, [])
            if not is_argument:
                argv += [param.opts[0], SECRET]
            found.append(((*path, param.name if is_argument else param.opts[0]), argv))
    return found


CASES = cases()


def test_every_parameter_is_covered() -> None:
    ids = {case for case, _ in CASES}
    assert len(ids) > 120
    assert {("submit", "--capability"), ("agents", "list", "--capability"), ("--token",)} <= ids
    assert ids >= ACCEPTED


@pytest.mark.parametrize(("case", "argv"), CASES, ids=[" ".join(c) for c, _ in CASES])
def test_a_refused_value_is_not_repeated(cli: Cli, case: tuple[str, ...], argv: list[str]) -> None:
    if "probe" in argv:
        with cli.weft.api(cli.project) as api:
            probe = {"name": "probe", "mechanism": "local", "config": {"command": ["python", "-V"]}}
            created = api.post("/api/targets", json=probe)
            assert created.status_code == 201, created.text
    r = cli(*argv)
    if case in ACCEPTED:
        assert r.exit_code == 0 or SECRET not in r.stdout + r.stderr, (r.stdout, r.stderr)
        return
    assert r.exit_code != 0, f"accepted {case}: {r.stdout[:300]}"
    assert r.stderr.startswith("shuttle: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert SECRET not in r.stdout + r.stderr, r.stderr
    for part in (SECRET[4:14], SECRET[-12:-1]):  # nor a recognisable piece of it
        assert part not in r.stdout + r.stderr, r.stderr
