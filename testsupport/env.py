"""The developer's own fabric settings kept out of the parts under test.

A developer who runs the suite may have ``NATS_URL``, ``LOOM_PROJECT_ID`` or ``WEFT_PORT``
in their shell, or an ``XDG_DATA_HOME`` that moves Loom's data. Each part reads those, so a
test that builds settings in-process or starts a part as a process starts from an
environment without them, then adds its own. The variables that steer the tests themselves
(which Chromium, where screenshots go) are kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

from pattern.zygote import ZYGOTE_ENV as PATTERN_ZYGOTE_ENV
from shuttle.zygote import ZYGOTE_ENV as SHUTTLE_ZYGOTE_ENV
from warp.zygote import ZYGOTE_ENV
from weft.zygote import ZYGOTE_ENV as WEFT_ZYGOTE_ENV

FABRIC_PREFIXES = ("NATS_", "LOOM_", "LOOMINAL_", "WEFT_", "PATTERN_")
"""What Loom's parts read (and the first wave's ``LOOMINAL_`` names, still refused loudly)."""
FABRIC_NAMES = frozenset({"MCP_PROJECT_PATH", "XDG_DATA_HOME"})
"""Unprefixed names a part reads: where the project is, where data goes."""
TEST_SETTINGS = frozenset({"LOOM_CHROMIUM", "LOOM_CONSOLE_SCREENSHOTS", "LOOM_TEST_ZYGOTE"})
"""Read by the tests, not by any part (docs/testing.md): kept."""
ZYGOTES = {
    "warp": ZYGOTE_ENV,
    "pattern": PATTERN_ZYGOTE_ENV,
    "shuttle": SHUTTLE_ZYGOTE_ENV,
    "weft": WEFT_ZYGOTE_ENV,
}
"""Each program with a zygote, and the variable that points its processes at one (the one
list: ``testsupport/zygote.py`` starts them, the bench's ``--forked`` keeps them)."""
PROCESS_START = frozenset(ZYGOTES.values())
"""How a Warp's, a Pattern's or a Shuttle's process starts, not what it does: forked from
the test process's zygotes (``testsupport/zygote.py`` sets them for the whole run). Kept,
so that whatever a test starts (Weft, a host's launcher, Node's MCP tools) starts its
processes that way too; a test of their own processes removes them (``also``)."""


def is_fabric(name: str, also: tuple[str, ...] = ()) -> bool:
    """Whether ``name`` configures a part (or starts with one of the caller's ``also``)."""
    if also and name.startswith(also):
        return True
    if name in TEST_SETTINGS or name in PROCESS_START:
        return False
    return name.startswith(FABRIC_PREFIXES) or name in FABRIC_NAMES


def without_fabric(env: Mapping[str, str] | None = None, *, also: tuple[str, ...] = ()) -> dict[str, str]:
    """A copy of ``env`` (this process's environment by default) for a part's process."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if not is_fabric(k, also)}


def strip_fabric(monkeypatch: pytest.MonkeyPatch, *, also: tuple[str, ...] = ()) -> None:
    """Remove the fabric's variables from this process for the test (restored after)."""
    for name in list(os.environ):
        if is_fabric(name, also):
            monkeypatch.delenv(name)
