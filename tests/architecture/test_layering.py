"""The house by concern, checked (docs/architecture.md, "Parts and layering"): no import
circle, no arrow from a lower layer back up (the rooms of ``shared/`` in the order that
page lists them), Shuttle on pure modules only, no module over 1,000 lines.

Every import counts: at module level, under ``TYPE_CHECKING`` and inside functions, since
each is a dependency a reader has to follow. Run alone with
``.venv/bin/pytest tests/architecture -q``; the failure names the modules.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from testsupport.pysource import parse

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("shared", "pattern", "warp", "weft", "loom", "shuttle")

MAY_IMPORT: dict[str, set[str]] = {
    "shared": set(),
    "pattern": {"shared"},
    "warp": {"shared", "pattern"},  # warp --with-memory serves Pattern's tools
    "weft": {"shared"},
    "loom": {"shared"},  # the public client (docs/client.md)
    "shuttle": {"shared", "loom"},  # Shuttle speaks through the client's transport
}
"""Which parts each part may import: shared/ is the floor, the parts never import each
other except Warp hosting Pattern."""

SHUTTLE_MAY_USE = {
    "shared.errors",
    "shared.legacy",
    "shared.limits",
    "shared.names",
    "shared.redact",
    "shared.text",
    "shared.tls",  # which TLS an HTTP client of Weft's address needs (ssl only)
    "shared.leases.patterns",
    "shared.agents.local",  # which agent a git hook works for (files and /proc only)
    "shared.git.guardhooks",  # loom-guard's git hooks (git rev-parse, files)
    "shared.trace.timeline",
    "shared.trace.env",
    "shared.trace.tracing",  # only when OTEL_* ask Shuttle to export (shared.trace.env decides)
    "shared.zygote",  # the console script's hand-off to a zygote (standard library at module level)
    "shared.loop",  # keep_startup_heap, in that zygote only (gc.freeze)
}
"""Shuttle speaks HTTP to Weft; from shared/ it takes pure modules only (no NATS)."""

MAX_LINES = 1000
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for part in PARTS for p in sorted((ROOT / part).rglob("*.py"))}


def _imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports (the nearest known module of each name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: list[str] = []
    for node in ast.walk(parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            wanted.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # ``from package import module`` depends on the module, not on the package
            wanted.extend(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    found = set()
    for target in wanted:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    known = _modules()
    return {name: frozenset(_imported(path, name, known)) for name, path in known.items()}


def _group(module: str) -> str:
    """The room a module lives in: a sub-package of shared/ or weft/, or a top module."""
    parts = module.split(".")
    if parts[0] in ("shared", "weft") and len(parts) > 2:
        return ".".join(parts[:2])
    if parts[0] in ("shared", "weft"):
        return module
    return parts[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_circle_and_a_long_way_round() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_modules() -> None:
    graph = {name: set(targets) for name, targets in _graph().items()}
    circles = _cycles(graph)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_no_import_circle_between_rooms() -> None:
    """A circle between two rooms (say shared/work and shared/context) is an arrow from a
    lower layer back up, even when no two modules form one."""
    rooms: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        room = _group(module)
        rooms.setdefault(room, set()).update(t for t in map(_group, targets) if t != room)
    circles = _cycles(rooms)
    assert not circles, "circles between rooms: " + "; ".join(" <-> ".join(c) for c in circles)


def _documented_floors() -> dict[str, int]:
    """Each room of ``shared/`` and its row in the architecture page's table of rooms, floor first."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = lines.index("| rooms | what they own |") + 2
    floors: dict[str, int] = {}
    for row, line in enumerate(lines[start:]):
        if not line.startswith("|"):
            break
        first_cell = line.split("|")[1]
        for path in re.findall(r"`(shared/[\w/]+?)(?:\.py|/)`", first_cell):
            floors[path.replace("/", ".")] = row
    return floors


def test_the_rooms_of_shared_are_the_architecture_pages_table() -> None:
    rooms = {_group(m) for m in _graph() if m.startswith("shared.")}
    assert rooms == set(_documented_floors())


def test_no_room_of_shared_imports_a_room_listed_below_it() -> None:
    """A room may use the rooms of its own row and the rows above it (the floor first)."""
    floor = _documented_floors()
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        if module.startswith("shared.")
        for target in targets
        if target.startswith("shared.") and floor[_group(target)] > floor[_group(module)]
    )
    assert upward == []


def test_parts_import_only_the_parts_below_them() -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if (part := module.split(".")[0]) != (other := target.split(".")[0]) and other not in MAY_IMPORT[part]
    )
    assert wrong == []


SHUTTLE_LOADS = ("shuttle", "loom.transport", "loom.retry", "loom.events", "loom.errors", "loom.refs")


def test_shuttle_uses_only_pure_shared_modules() -> None:
    used = {t for m, targets in _graph().items() if m.startswith(SHUTTLE_LOADS) for t in targets}
    assert {t for t in used if t.startswith("shared")} <= SHUTTLE_MAY_USE
    # the typed client (and the models it loads) stays out of Shuttle's start-up
    assert {t for t in used if t.startswith("loom")} <= {"loom", *SHUTTLE_LOADS[1:]}


def test_no_module_over_a_thousand_lines() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    too_long = {
        name: lines for name in tracked if (lines := len((ROOT / name).read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}
