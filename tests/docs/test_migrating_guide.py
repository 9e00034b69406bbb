"""docs/migrating.md stays true.

Its tables are read as data and checked against the real parts: every Warp and
Pattern tool (from the servers' ``list_tools``), every Weft route (the app's
routes), every Shuttle command (the Typer tree) is named once as ours, and
everything named as ours exists; the TypeScript names (tools, arguments,
variables, REST fields, Shuttle keys) agree with ``shared/legacy.py``, which is
what the parts act on. A new tool, route or command fails here until the guide
has a row for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from pattern.errors import PatternError
from pattern.tools import TOOLS as PATTERN_TOOLS
from shared import legacy
from shared.identity import Identity
from warp.runtime import WarpRuntime
from warp.server import build_server
from warp.settings import WarpSettings
from weft.app import create_app
from weft.settings import WeftSettings

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"
STATUSES = {"same", "renamed", "changed", "dropped", "new"}
TREATMENT = {
    "same": "read",
    "alias": "read",
    "translated": "translated",
    "refused": "refused",
    "not_read": "not read",
}


@dataclass(frozen=True)
class Table:
    part: str
    """The ``##`` section it is in, lower-case (warp, pattern, weft, shuttle)."""
    header: tuple[str, ...]
    rows: tuple[dict[str, str], ...]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def read_tables(text: str) -> Iterator[Table]:
    part = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            part = line[3:].strip().lower()
        if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|[-| ]+\|", lines[i + 1].strip()):
            header = tuple(_cells(line))
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = _cells(lines[i])
                assert len(cells) == len(header), f"docs/migrating.md: row has {len(cells)} cells: {lines[i]}"
                rows.append(dict(zip(header, cells, strict=True)))
                i += 1
            yield Table(part, header, tuple(rows))
            continue
        i += 1


def names(cell: str) -> list[str]:
    """The backticked names of a cell; none for '—'."""
    return re.findall(r"`([^`]+)`", cell)


def one(cell: str) -> str | None:
    found = names(cell)
    assert len(found) <= 1, cell
    return found[0] if found else None


@pytest.fixture(scope="module")
def tables() -> list[Table]:
    return list(read_tables(GUIDE.read_text(encoding="utf-8")))


def of(tables: list[Table], first: str, part: str | None = None) -> list[dict[str, str]]:
    rows = [
        row for t in tables if t.header[0] == first and (part is None or t.part == part) for row in t.rows
    ]
    assert rows, f"docs/migrating.md has no '{first}' table" + (f" under {part}" if part else "")
    return rows


def test_every_row_has_a_known_status(tables: list[Table]) -> None:
    for table in tables:
        if "status" in table.header:
            for row in table.rows:
                assert row["status"] in STATUSES, (table.header, row)
                if row["status"] != "new" and row["status"] != "dropped":
                    assert names(row[table.header[1]]), f"{row}: a Loom name is missing"
                if row["status"] == "dropped":
                    assert row.get("why") or row.get("notes"), f"{row}: dropped without a why"


# -- tools ------------------------------------------------------------------------------------------


async def warp_tool_schemas(tmp_path: Path) -> dict[str, dict[str, Any]]:
    identity = Identity(
        project_id="guide",
        project_path=tmp_path,
        agent_id="a" * 32,
        base_agent_id="a" * 32,
        hostname="host",
        handle="guide",
        agent_type="generic",
        user_id="b" * 16,
    )
    server = build_server(WarpRuntime(identity, WarpSettings(), nats_url="nats://127.0.0.1:1"))
    return {tool.name: tool.input_schema for tool in await server.list_tools()}


def pattern_tool_schemas() -> dict[str, dict[str, Any]]:
    return {spec.name: spec.model.model_json_schema() for spec in PATTERN_TOOLS if spec.model is not None}


async def test_tools_named_are_ours_and_ours_are_named(tables: list[Table], tmp_path: Path) -> None:
    for part, ours in (
        ("warp", set(await warp_tool_schemas(tmp_path))),
        ("pattern", set(pattern_tool_schemas())),
    ):
        named = [n for row in of(tables, "TypeScript tool", part) for n in names(row["Loom tool"])]
        assert sorted(set(named) - ours) == [], f"{part}: the guide names tools that do not exist"
        assert sorted(ours - set(named)) == [], f"{part}: tools missing from docs/migrating.md (add a row)"
        assert len(named) == len(set(named)), f"{part}: a tool is listed twice"


def test_the_originals_tool_names_match_the_table(tables: list[Table]) -> None:
    guide: dict[str, str] = {}
    for part in ("warp", "pattern"):
        for row in of(tables, "TypeScript tool", part):
            ours = one(row["Loom tool"])
            for original in names(row["TypeScript tool"]):
                if ours is not None:
                    guide[original] = ours
    for original, renamed in legacy.TOOLS.items():
        assert guide.get(original) == renamed.ours, f"{original}: shared/legacy.py and the guide disagree"


async def test_arguments_match_the_table_and_the_tools(tables: list[Table], tmp_path: Path) -> None:
    schemas = {**(await warp_tool_schemas(tmp_path)), **pattern_tool_schemas()}
    guide: dict[tuple[str, str], str | None] = {}
    for part in ("warp", "pattern"):
        for row in of(tables, "tool", part):
            tool = one(row["tool"])
            original = one(row["TypeScript argument"])
            assert tool is not None and original is not None, row
            assert tool in schemas, f"{tool}: not a tool"
            ours = one(row["Loom argument"])
            if ours is not None:
                assert ours.split(".")[0] in schemas[tool].get("properties", {}), (
                    f"{tool}: no argument {ours}"
                )
            guide[(tool, original)] = ours
    table = {
        (tool, original): renamed.ours.split(" ")[0] if renamed.ours else None
        for tool, arguments in legacy.ARGUMENTS.items()
        for original, renamed in arguments.items()
    }
    for key, ours in table.items():
        expected = f"memories.{ours}" if ours and key[1].startswith("memories.") else ours
        assert key in guide, f"{key}: in shared/legacy.py, missing from the guide"
        assert guide[key] == expected, f"{key}: the guide says {guide[key]}, shared/legacy.py {expected}"
    assert set(guide) <= set(table), f"not in shared/legacy.py: {sorted(set(guide) - set(table))}"


# -- environment, files, keys ---------------------------------------------------------------------------


def test_variables_match_the_table(tables: list[Table]) -> None:
    for part in ("warp", "pattern", "weft", "shuttle"):
        rows = {one(row["TypeScript variable"]): row for row in of(tables, "TypeScript variable", part)}
        expected = {v.name: v for v in legacy.variables_for([part])}  # type: ignore[list-item]
        assert set(rows) == set(expected), f"{part}: the guide and shared/legacy.py list different variables"
        for name, var in expected.items():
            row = rows[name]
            assert row["old name"] == TREATMENT[var.how], f"{part} {name}: {row['old name']} vs {var.how}"
            if var.how in ("same", "alias", "translated") and var.ours is not None:
                assert one(row["Loom variable"]) == var.ours, f"{part} {name}"


def test_rest_fields_and_shuttle_keys_match_the_table(tables: list[Table]) -> None:
    for first, column, table in (
        ("TypeScript field", "Loom field", legacy.REST_FIELDS),
        ("TypeScript key", "Loom key", legacy.SHUTTLE_KEYS),
    ):
        rows = [row for row in of(tables, first) if column in row]
        guide = {one(row[first]): one(row[column]) for row in rows}
        assert guide == {name: renamed.ours for name, renamed in table.items()}, first


def test_the_original_warp_files_keys_match_the_table(tables: list[Table]) -> None:
    rows = [row for row in of(tables, "TypeScript key", "warp") if "Loom" in row]
    keys = {names(row["TypeScript key"])[0].split(".")[0] for row in rows}
    assert keys == {"channels", *legacy.WARP_FILE_KEYS}


# -- routes and commands --------------------------------------------------------------------------------


def _routes(routes: Any) -> Iterator[Any]:
    for route in routes:
        inner = getattr(route, "original_router", None)  # an included router (FastAPI >= 0.16x)
        if inner is not None:
            yield from _routes(inner.routes)
        else:
            yield route


def weft_routes() -> set[str]:
    app = create_app(WeftSettings(project_id="guide"))
    found: set[str] = set()
    for route in _routes(app.routes):
        methods = getattr(route, "methods", None)
        if methods:
            found |= {f"{method} {route.path}" for method in methods if method != "HEAD"}
        elif type(route).__name__ == "APIWebSocketRoute":
            found.add(f"WS {route.path}")
    for path, operations in app.openapi()["paths"].items():  # the contract agrees with the routes
        assert {f"{m.upper()} {path}" for m in operations} <= found
    return found


def test_routes_named_are_ours_and_ours_are_named(tables: list[Table]) -> None:
    named = [n for row in of(tables, "TypeScript route", "weft") for n in names(row["Loom route"])]
    ours = weft_routes()
    assert sorted(set(named) - ours) == [], "the guide names routes Weft does not have"
    assert sorted(ours - set(named)) == [], "routes missing from docs/migrating.md (add a row)"


def shuttle_commands() -> set[str]:
    from shuttle.cli import app

    def walk(command: Any, path: str) -> Iterator[str]:
        sub = getattr(command, "commands", None)
        if sub:
            if getattr(command, "invoke_without_command", False):
                yield path  # a group that also runs on its own (shuttle leases)
            for name, child in sub.items():
                if not getattr(child, "hidden", False):
                    yield from walk(child, f"{path} {name}")
        else:
            yield path

    return set(walk(typer.main.get_command(app), "shuttle"))


def test_commands_named_are_ours_and_ours_are_named(tables: list[Table]) -> None:
    named = [n for row in of(tables, "TypeScript command", "shuttle") for n in names(row["Loom command"])]
    ours = shuttle_commands()
    assert sorted(set(named) - ours) == [], "the guide names commands Shuttle does not have"
    assert sorted(ours - set(named)) == [], "commands missing from docs/migrating.md (add a row)"


def test_pattern_codes_are_the_ones_pattern_answers_with(tables: list[Table]) -> None:
    named = {one(row["Loom code"]) for row in of(tables, "TypeScript code", "pattern")}

    def codes(cls: type[PatternError]) -> Iterator[str]:
        yield cls.code
        for sub in cls.__subclasses__():
            yield from codes(sub)

    assert set(codes(PatternError)) <= named
