"""Root conftest: load the real-nats-server fixtures for every test tree.

Being at the repository root, this file puts the root on ``sys.path``, so the test-only
``testsupport`` package (not installed with the project) is importable from every tree.

Under pytest-xdist (``make test`` runs ``-n 4 --dist loadgroup``) each test file is one
group, run by one worker in file order, so module fixtures (a chromium, a Weft) start once
and a file's tests never race each other; a file that sets its own ``xdist_group`` joins
that group instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

pytest_plugins = ["testsupport.sweep", "testsupport.servers", "testsupport.zygote"]

FIRST = (
    "test-scenarios/31-multi-host/test_s31_multi_host.py",  # about 2 min; `make drill`, not `make test`
    "tests/perf/test_perf_smoke.py",  # four groups, one run each
    "tests/weft/test_weft_fuzz.py",
    "test-scenarios/17-nats-cluster/",
    "test-scenarios/15-failure-recovery/",
)
"""The longest files (a minute or more each): handed out first, so that no worker starts
one of them last while the others have nothing left to do. Only the order changes."""


@pytest.hookimpl(tryfirst=True)  # the groups set before xdist's own hook reads them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: order and groups untouched
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, first in enumerate(FIRST) if path.startswith(first)), len(FIRST))

    items.sort(key=rank)  # stable: every file keeps its tests' order


@pytest.fixture(autouse=True)
def _root_logger_left_as_found() -> Iterator[None]:
    """A test that configures logging in-process (deploy's runner CLI calls
    ``configure_logging``) leaves the root logger as it found it. Otherwise its handler, on a
    stream closed with that test's capture, turns every later INFO line of the same process
    into a ``--- Logging error ---`` on stderr: Shuttle's in-process CLI tests then fail, and
    under pytest-xdist which ones depends on which files share a worker."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)


TERMINAL_VARIABLES = ("COLUMNS", "LINES")
"""Set in pytest-xdist's workers (80 x 24) and not in a plain run: Shuttle's tables (and
rich's width) follow them, so tests would see other output under xdist."""


def pytest_configure(config: pytest.Config) -> None:
    """The same environment in every process that runs tests (no terminal size, see
    :data:`TERMINAL_VARIABLES`). In-process parts (Weft apps, work queues) record their work
    spans the way the real processes do (``shared.trace.tracing.configure`` at start),
    whatever test runs first; never exported from here, whatever ``OTEL_*`` the
    developer's shell has."""
    for name in TERMINAL_VARIABLES:
        os.environ.pop(name, None)
    from shared.trace import tracing

    tracing.configure("loom-weft", env={})
