"""Pytest plugin: the session nats-server forgets what a finished test file made.

Each test keeps apart from the others by a project of its own, and leaves that project's
streams, buckets and consumers behind on the worker's session server (``nats_server``). A
live server spends CPU on every stream and consumer it holds, with no client and no message
moving: measured at the end of ``tests/weft`` run alone, 2,827 streams and 981 consumers
cost it 3.9% of a core, where the same stored state in a server started afresh cost 0.3 to
0.8% (docs/performance.md). So when a test file ends, the streams made on the session server
since the previous file ended are deleted, after the file's own fixtures have stopped.

Kept are:

* what a session-scoped fixture built on the session server (Shuttle's and the scenarios'
  Weft) made as it started, and everything made during a file whose tests use one: that
  Weft outlives the file and keeps serving the projects it has seen (sweeps, watches, its
  default project's streams made on first use). Deleted from under it, they turned into
  warnings at each of its sweeps and reads, the whole run long;
* the buckets not tied to one project (``loom-_global-agents``, ``loom-_auth``, ...), which
  a live Weft may make on first use and keep using.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from shared.names import kv_stream
from shared.nats.client import connect
from shared.nats.jsapi import stream_names
from shared.nats.server import EmbeddedNatsServer

_NOT_ONE_PROJECT = kv_stream("loom-_")
"""The stream-name prefix of the buckets not tied to one project (shared/names.py)."""

_BATCH = 100


class _Sweeper:
    def __init__(self) -> None:
        self.server: EmbeddedNatsServer | None = None
        self.kept: set[str] = set()
        self.keeping: Path | None = None
        """A file whose tests use a session Weft: what is made during it is kept."""

    @contextmanager
    def watching(self, server: EmbeddedNatsServer) -> Iterator[None]:
        self.server, self.kept = server, set()
        try:
            yield
        finally:
            self.server = None

    def keep_all(self) -> None:
        """Keep every stream there is now (what a session fixture has just made)."""
        if self.server is not None:
            self.kept = _in_thread(_sweep(self.server.url, self.kept, keep=True))

    def file_ended(self, path: Path) -> None:
        if self.server is not None:
            keep = self.keeping == path
            self.kept = _in_thread(_sweep(self.server.url, self.kept, keep=keep))


async def _sweep(url: str, kept: set[str], keep: bool) -> set[str]:
    """Delete the streams not in ``kept`` (unless ``keep``); the streams left afterwards."""
    client = await connect(url=url, name="loom-test-sweep")
    try:
        names = set(await stream_names(client))
        if keep:
            return names
        doomed = sorted(n for n in names - kept if not n.startswith(_NOT_ONE_PROJECT))
        js = client.jetstream(timeout=30.0)  # a loaded machine deletes slowly, but does
        for start in range(0, len(doomed), _BATCH):
            results = await asyncio.gather(
                *(js.delete_stream(name) for name in doomed[start : start + _BATCH]), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, NotFoundError):
                    raise result
        return names - set(doomed)
    finally:
        await client.close()


def _in_thread(work: Coroutine[Any, Any, set[str]]) -> set[str]:
    """Run a coroutine to the end in a thread of its own: pytest-asyncio keeps the session's
    event loop set on this thread between tests, and ``asyncio.run`` here would unset it."""
    outcome: list[set[str] | BaseException] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(work))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, name="loom-test-sweep")
    thread.start()
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


SWEEPER = _Sweeper()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    """A session fixture built on the session server (Shuttle's and the scenarios' Weft)
    serves every file's projects, its default project among them: what it made is kept."""
    value = yield
    if _built_on_the_session_server(fixturedef):
        SWEEPER.keep_all()
    return value


def _built_on_the_session_server(definition: pytest.FixtureDef[Any]) -> bool:
    return definition.scope == "session" and "nats_server" in definition.argnames


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note a file whose tests use a session Weft (by the fixture's definition: tests/weft has
    a ``weft`` fixture of its own, one per test)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if any(_built_on_the_session_server(chain[-1]) for chain in definitions if chain):
        SWEEPER.keeping = item.path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield  # the file's own fixtures stop first (when the next test is in another file)
    if nextitem is not None and nextitem.path != item.path:
        SWEEPER.file_ended(item.path)
