"""Settings are read at the edge and passed in (docs/architecture.md, Settings).

Each part reads its environment once, in its CLI ``main`` or app factory, into
settings objects (:mod:`shared.settings` and each part's settings module) and
passes them down. This test walks the source of every part and lists where the
environment is read: ``os.environ`` / ``os.getenv``, a pydantic-settings class
built (it reads the environment for every field it is not given), or one of the
loaders that build them. Every such place must be in :data:`ALLOWED`, with the
reason; an entry that no longer reads anything fails too, so the list stays true.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from testsupport.pysource import parse

REPO = Path(__file__).resolve().parents[2]
PARTS = ("shared", "warp", "weft", "pattern", "shuttle")

OS_READS = frozenset({"environ", "getenv", "putenv", "unsetenv"})
LOADERS = frozenset({"load_loom_settings", "load_warp_settings", "load_settings", "from_env", "first_set"})
"""Functions that build settings from the environment (``shared.settings.load`` is added
where a module imports it: ``load`` alone is a common name)."""

SETTINGS_MODULES = "the settings classes and their loaders"
CLI = "a command's entry point: the edge"
DEFAULT = "the default when the caller passes none (tests, tools); every part passes its own"

ALLOWED: dict[str, str] = {
    # the settings themselves
    "shared/settings.py": SETTINGS_MODULES,
    "warp/settings.py": SETTINGS_MODULES,
    "weft/settings.py": SETTINGS_MODULES,
    "pattern/config.py": SETTINGS_MODULES,
    "shuttle/config.py": SETTINGS_MODULES + " (flag > environment > config file)",
    "shared/identity.py::load_settings": "the identity loader each CLI calls",
    "shared/identity.py::_problem": "names, in a start-up error, the alias that was actually set",
    "shared/legacy.py::adopt_environment": "the TypeScript Loom's variables, checked by each CLI first",
    "shared/legacy.py::apply_environment": "the same, translated for the settings to read",
    # the edges: entry points and the app factory
    "warp/cli.py::main": CLI,
    "warp/lander.py::main": CLI + " (loom-lander)",
    "warp/run.py::main": CLI + " (loom-run: the environment it hands the agent CLI)",
    "warp/hooks.py::main": CLI + " (loom-hook: the session's settings, LOOM_GUARD_STRICT)",
    "shared/git/landing.py::HostLanding.gate": "the gate runs with the lander's environment, "
    "credentials removed (gate_env)",
    "warp/cli.py::_memory_tools": "warp --with-memory: Pattern's PATTERN_* variables, at Warp's start-up",
    "shared/zygote.py": "a started warp or pattern hands its environment to the child forked to run as it",
    "warp/zygote.py::_preload": "warp --zygote: PYDANTIC_ERRORS_INCLUDE_URL, as warp.cli.main sets it",
    "pattern/cli.py::main": CLI,
    "weft/cli.py::_settings": CLI + " (weft serve)",
    "weft/cli.py::_leave_out_unused": CLI + " (weft serve: which NATS, before nats-py loads)",
    "weft/app.py::create_app": "the app factory, given no settings",
    "weft/spinup/__init__.py::default_service": "the spin-up service the app factory builds",
    "weft/demo/__init__.py::clean_environment": "weft demo: its Weft gets none of the caller's settings",
    "weft/demo/__init__.py::Demo.__init__": "weft demo: the same, for its agent",
    "weft/spinup/demo_agent.py": "a program: its LOOM_DEMO_* variables, the environment it hands Warp",
    "shuttle/cli.py::root": CLI + " (NO_COLOR)",
    "shuttle/output.py::console": "the terminal's width (COLUMNS) when stdout is not a terminal",
    "shuttle/guard.py::who_am_i": "runs in an agent's hook: the agent it runs for",
    "shuttle/guard.py::run": "shuttle guard's own switches",
    "shuttle/commands/leases.py::install_hook_cmd": "warns when the hook cannot know its agent",
    "shuttle/commands/config_cmd.py::_warn_overridden": "says which configured value a variable overrides",
    # not settings: OpenTelemetry's own variables, and the environment of processes Weft starts
    "shared/trace/env.py": "OpenTelemetry's OTEL_* variables (a CLI calls tracing.configure)",
    "shared/trace/tracing.py::configure": "the same",
    "weft/spinup/mechanisms/base.py::secret_from_env": "a target's secret, read when used (docs/spinup.md)",
    "weft/spinup/mechanisms/local.py::LocalMechanism._env": "what a local agent gets (PATH, ...)",
    "weft/spinup/mechanisms/local.py::LocalMechanism.probe": "where its command is looked up (PATH)",
    "weft/spinup/mechanisms/kubernetes.py::KubernetesMechanism.access": "in a cluster (KUBERNETES_*)?",
    "shared/git/cli.py::git": "what the git it runs gets (PATH, HOME, SSH agent, credential helpers)",
    # defaults for callers that pass nothing
    "shared/identity.py::resolve_identity": DEFAULT,
    "shared/nats/client.py::connect": DEFAULT,
    "pattern/runtime.py::PatternRuntime.__init__": DEFAULT,
    "weft/spinup/managed.py::ManagedSpinup.__init__": DEFAULT,
    "weft/spinup/manager.py::SpinupManager.__init__": DEFAULT,
    "weft/spinup/mechanisms/local.py::LocalMechanism._log_dir": DEFAULT
    + " (the data home for local agents' logs)",
}


def settings_classes(trees: dict[str, ast.Module]) -> frozenset[str]:
    """Names of the pydantic-settings classes defined in the parts (subclasses included)."""
    found = {"BaseSettings"}
    grew = True
    while grew:
        grew = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ClassDef)
                    and node.name not in found
                    and any(isinstance(b, ast.Name) and b.id in found for b in node.bases)
                ):
                    found.add(node.name)
                    grew = True
    return frozenset(found - {"BaseSettings"})


def env_reads(tree: ast.Module, classes: frozenset[str]) -> Iterator[tuple[str, int]]:
    """``(qualified name of the enclosing function or class, line)`` of each read in ``tree``."""
    readers = set(LOADERS | classes)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "shared.settings":
            readers.update(a.asname or a.name for a in node.names if a.name == "load")
    found: list[tuple[str, int]] = []

    class Visitor(ast.NodeVisitor):
        def __init__(self) -> None:
            self.scope: list[str] = []

        def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
            self.scope.append(node.name)
            self.generic_visit(node)
            self.scope.pop()

        visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter

        def _found(self, node: ast.AST) -> None:
            found.append((".".join(self.scope) or "<module>", getattr(node, "lineno", 0)))

        def visit_Attribute(self, node: ast.Attribute) -> None:
            if isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in OS_READS:
                self._found(node)
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module == "os" and any(a.name in OS_READS for a in node.names):
                self._found(node)

        def visit_Call(self, node: ast.Call) -> None:
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in readers:
                self._found(node)
            self.generic_visit(node)

        def visit_keyword(self, node: ast.keyword) -> None:
            # Field(default_factory=SomeSettings): built when the enclosing settings are
            if (
                node.arg == "default_factory"
                and isinstance(node.value, ast.Name)
                and node.value.id in classes
            ):
                self._found(node.value)
            self.generic_visit(node)

    Visitor().visit(tree)
    yield from found


def allowed_by(path: str, where: str) -> str | None:
    """The :data:`ALLOWED` entry covering a read in ``where`` of ``path``, if any."""
    for key in (f"{path}::{where}", f"{path}::{where.split('.')[0]}", path):
        if key in ALLOWED:
            return key
    return None


def _sources() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(REPO)): parse(path.read_text(encoding="utf-8"), str(path))
        for part in PARTS
        for path in sorted((REPO / part).rglob("*.py"))
    }


@pytest.fixture(scope="module")
def reads() -> list[tuple[str, str, int]]:
    trees = _sources()
    classes = settings_classes(trees)
    return [(path, where, line) for path, tree in trees.items() for where, line in env_reads(tree, classes)]


def test_only_the_edges_read_the_environment(reads: list[tuple[str, str, int]]) -> None:
    stray = [f"{path}:{line} ({where})" for path, where, line in reads if allowed_by(path, where) is None]
    assert stray == [], "read the settings at the edge and pass them in (docs/architecture.md, Settings)"


def test_every_allowed_place_still_reads_it(reads: list[tuple[str, str, int]]) -> None:
    used = {allowed_by(path, where) for path, where, _ in reads}
    assert sorted(set(ALLOWED) - used) == []


def test_the_domain_modules_named_in_the_issue_read_nothing(reads: list[tuple[str, str, int]]) -> None:
    domain = (
        "shared/work/rules.py",
        "shared/work/records.py",
        "shared/nats/jetstream.py",
        "shared/nats/server.py",
    )
    assert [r for r in reads if r[0] in domain] == []


@pytest.mark.parametrize(
    "source",
    [
        "import os\ndef f():\n    return os.environ.get('LOOM_X')",
        "import os\nclass A:\n    def f(self):\n        return os.getenv('LOOM_X')",
        "from os import environ\n",
        "from shared.settings import LoomSettings\ndef f():\n    return LoomSettings().js_replicas",
        "from shared.settings import load\ndef f(cls):\n    return load(cls)",
        "def f():\n    return load_loom_settings()",
        "class S(BaseSettings):\n    pass\nclass T(BaseSettings):\n    s: S = Field(default_factory=S)",
    ],
)
def test_the_scan_sees_each_kind_of_read(source: str) -> None:
    tree = parse(source)
    classes = settings_classes({"x.py": tree}) | {"LoomSettings"}
    assert list(env_reads(tree, classes)) != []


def test_the_scan_leaves_other_code_alone() -> None:
    tree = parse("import os\ndef f(settings):\n    return os.path.join(settings.loom.data_home, 'x')")
    assert list(env_reads(tree, frozenset({"LoomSettings"}))) == []
