"""``make test`` runs each test file as one pytest-xdist group (root ``conftest.py``): a
file's module fixtures start once and its tests never race each other. xdist carries the
group in the node id, so a test can see whether its own file's group reached the scheduler;
until 2026-12-03 it silently did not (docs/testing.md, "In parallel")."""

from __future__ import annotations

import pytest


def test_this_file_is_its_own_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    nodeid = request.node.nodeid
    path = nodeid.split("::", 1)[0]
    grouped = hasattr(request.config, "workerinput") and bool(request.config.getvalue("loadgroup"))
    if grouped:
        assert nodeid.endswith(f"@{path}"), nodeid
    else:  # a serial run or another distribution: the node id is the plain one
        assert "@" not in nodeid, nodeid
