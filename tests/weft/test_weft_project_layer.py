"""Weft's per-project layer and the services that plug into it (weft/project/hub.py):
parts attach by name, in order, when a project starts being served, keep it from being
dropped while busy, and stop in the reverse order; the layer imports none of them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from nats.aio.client import Client as NatsClient

from testsupport.pysource import parse
from weft.a2a.push import ProjectPush
from weft.metrics import Metrics
from weft.project.hub import Attach, ProjectContext, ProjectHub
from weft.settings import WeftSettings

ROOT = Path(__file__).resolve().parents[2]
ABOVE_THE_LAYER = ("weft.a2a", "weft.spinup", "weft.routes", "weft.sweeper", "weft.app")


@dataclass
class Part:
    name: str
    log: list[str] = field(default_factory=list)
    busy_now: bool = False

    def busy(self) -> bool:
        return self.busy_now

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")


async def test_parts_attach_in_order_stop_in_reverse_and_keep_a_busy_project(
    nc: NatsClient, project_id: str
) -> None:
    log: list[str] = []
    made: dict[str, Part] = {}

    def attacher(name: str, *, attaches: bool = True) -> Attach:
        async def attach(project: ProjectContext) -> Part | None:
            log.append(f"attach {name} to {project.project_id}")
            if not attaches:
                return None
            made[name] = Part(name, log)
            return made[name]

        return attach

    settings = WeftSettings(project_id=project_id)
    extensions = {
        "first": attacher("first"),
        "none": attacher("none", attaches=False),
        "second": attacher("second"),
    }
    hub = ProjectHub(nc, settings, Metrics(), None, extensions=extensions)
    context = await hub.get(project_id)

    assert log == [f"attach {name} to {project_id}" for name in ("first", "none", "second")]
    assert list(context.extensions) == ["first", "second"]
    assert context.extension("second", Part) is made["second"]
    assert context.extension("second", ProjectPush) is None  # attached, but not of that kind
    assert context.extension("none", Part) is None
    assert not context.busy()
    made["second"].busy_now = True
    assert context.busy()
    made["second"].busy_now = False

    await hub.close()
    assert log[3:] == ["stop second", "stop first"]


async def test_the_cap_drops_the_least_recently_used_but_never_one_in_use(
    nc: NatsClient, project_id: str
) -> None:
    """Beyond ``max_projects`` the least recently used project stops being served, but not
    the default one, a busy one, one whose events a client follows (its stream would go
    silent with no error), nor the one just started for its caller. A session Weft with
    every other project busy once dropped a project as it started: the WebSocket that had
    asked for it never saw an event (CI run 170)."""
    made: dict[str, Part] = {}

    async def attach(project: ProjectContext) -> Part:
        made[project.project_id] = Part(project.project_id)
        return made[project.project_id]

    hub = ProjectHub(
        nc, WeftSettings(project_id=project_id, max_projects=2), Metrics(), None, extensions={"p": attach}
    )
    a, b, c, d = (f"{project_id}-{k}" for k in "abcd")

    def served() -> set[str]:
        return {context.project_id for context in hub.served()}

    try:
        await hub.get(project_id)
        followed = await hub.get(a)
        listener = followed.relay.listen(lambda kind: True)  # a WebSocket follows a's events
        await hub.get(b)
        made[b].busy_now = True  # b's agents still run
        started = await hub.get(c)  # every other project is in use: c is over the cap, kept
        assert served() == {project_id, a, b, c}
        assert started.relay.listening == 0 and hub.served()[-1] is started
        followed.relay.unlisten(listener)
        made[b].busy_now = False
        await hub.get(d)  # a and b are free again: the least recently used go first, c too
        assert served() == {project_id, d}
    finally:
        await hub.close()


def test_the_layer_imports_none_of_the_services_that_plug_into_it() -> None:
    found: list[str] = []
    for path in sorted((ROOT / "weft" / "project").glob("*.py")):
        for node in ast.walk(parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.name}: {m}" for m in modules if m.startswith(ABOVE_THE_LAYER)]
    assert found == []
