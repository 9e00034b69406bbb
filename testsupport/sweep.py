"""Pytest plugin: the session nats-server forgets what a finished test file made.

Each test keeps apart from the others by a project of its own, and leaves that project's
streams, buckets and consumers behind on the worker's session server (``nats_server``). A
live server spends CPU on every stream and consumer it holds, with no client and no message
moving: measured at the end of ``tests/weft`` run alone, 2,827 streams and 981 consumers
cost it 3.9% of a core, where the same stored state in a server started afresh cost 0.3 to
0.8% (docs/performance.md). So when a test file ends, the streams made on the session server
since the previous file ended are deleted, after the file's own fixtures have stopped.

Kept are:

* the buckets of no one project (``loom-_global-agents``, ``loom-_auth``, ...), which a live
  Weft may make on first use and keep using;
* what a session-scoped fixture built on the session server (Shuttle's and the scenarios'
  Weft) made as it started, and whatever its projects (its default one) make later.

The projects a file's tests made through such a Weft go from under it when the file ends,
as a finished tenant's would: it logs a warning at each of its sweeps of them while it still
serves them. Runs that kept everything made during those files left the session servers
using 3.9 to 4.7 s of CPU a minute by the end, against about 3 with them swept
(docs/performance.md).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from shared.names import kv_stream, project_resource
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
        self.protected: tuple[str, ...] = (_NOT_ONE_PROJECT,)
        """Name prefixes never deleted: the buckets of no one project, and the streams of the
        projects a session Weft had when it started (its default project)."""

    @contextmanager
    def watching(self, server: EmbeddedNatsServer) -> Iterator[None]:
        self.server, self.kept, self.protected = server, set(), (_NOT_ONE_PROJECT,)
        try:
            yield
        finally:
            self.server = None

    def keep_all(self) -> None:
        """Keep every stream there is now (what a session fixture has just made), and every
        stream its projects make later."""
        if self.server is not None:
            self.kept = _in_thread(_listed(self.server.url))
            projects = {owner.project_id for name in self.kept if (owner := project_resource(name))}
            prefixes = {
                prefix
                for project in projects
                for prefix in (f"LOOM-{project}-", kv_stream(f"loom-{project}-"), f"OBJ_loom-{project}-")
            }
            self.protected = tuple(sorted(set(self.protected) | prefixes))

    def file_ended(self) -> None:
        if self.server is not None:
            self.kept = _in_thread(_sweep(self.server.url, self.kept, self.protected))


async def _listed(url: str) -> set[str]:
    """Every stream on the server."""
    client = await connect(url=url, name="loom-test-sweep")
    try:
        return set(await stream_names(client))
    finally:
        await client.close()


async def _sweep(url: str, kept: set[str], protected: tuple[str, ...]) -> set[str]:
    """Delete the streams not in ``kept`` whose names start with none of ``protected``; the
    streams left afterwards."""
    client = await connect(url=url, name="loom-test-sweep")
    try:
        names = set(await stream_names(client))
        doomed = sorted(n for n in names - kept if not n.startswith(protected))
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield  # the file's own fixtures stop first (when the next test is in another file)
    if nextitem is not None and nextitem.path != item.path:
        SWEEPER.file_ended()
