"""Fixtures for the multi-agent scenarios (the harness lives in ``scenario_harness/``).

* ``weft`` — one real Weft for the whole session (uvicorn in a thread) on the session
  nats-server; scenarios share it and stay apart by project id, as tenants do.
* ``fabric`` — that NATS and Weft, a fresh project id and a scratch folder.
* ``weft_factory`` — a Weft of its own with other settings (policy file, tokens, NATS URL).

Every test collected here carries the ``scenario`` marker (``pytest -m "not scenario"``
leaves them out).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from scenario_harness import Connection, Fabric, RunningWeft, new_project_id, run_weft

from shared.nats.server import EmbeddedNatsServer
from shared.settings import NatsSettings
from testsupport.env import strip_fabric

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "scenario: a multi-agent end-to-end scenario (test-scenarios/)")
    config.addinivalue_line(
        "markers", "drill: the multi-host drill, run alone by `make drill` (CI's second stage)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.scenario)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own NATS_URL, LOOM_* or WEFT_* must not reach in-process Weft settings."""
    strip_fabric(monkeypatch)


@pytest.fixture(scope="session")
def weft(nats_server: EmbeddedNatsServer) -> Iterator[RunningWeft]:
    with run_weft(NatsSettings(url=nats_server.url)) as running:
        yield running


@pytest.fixture
def fabric(nats_server: EmbeddedNatsServer, weft: RunningWeft, tmp_path: Path) -> Fabric:
    return Fabric(conn=Connection(nats_server.url), weft=weft, project_id=new_project_id(), workdir=tmp_path)


class WeftFactory(Protocol):
    def __call__(
        self, nats: NatsSettings | None = None, **settings: Any
    ) -> AbstractContextManager[RunningWeft]: ...


@pytest.fixture
def weft_factory(nats_server: EmbeddedNatsServer) -> WeftFactory:
    """``with weft_factory(policy_file=...) as weft:`` — a Weft of this test's own."""

    def make(nats: NatsSettings | None = None, **settings: Any) -> AbstractContextManager[RunningWeft]:
        return run_weft(nats or NatsSettings(url=nats_server.url), **settings)

    return make
