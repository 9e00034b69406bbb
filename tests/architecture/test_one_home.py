"""One home for each idea (docs/architecture.md): the marks an idea leaves in code are found
only in its home. Each row names the idea, a pattern that only code doing that idea's work
contains, and the files allowed to contain it; the failure lists the files that do it again.

Run alone with ``.venv/bin/pytest tests/architecture -q``. Some ideas cannot leave such a
mark; they are held elsewhere: every environment read by ``tests/shared/test_settings_edge.py``,
the submission limits by ``tests/shared/work/test_submission_parity.py``, the tool schemas
by ``tests/shared/mcp/test_tool_contract.py``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("shared", "warp", "weft", "shuttle", "pattern", "loom")

HOMES: dict[str, tuple[str, set[str]]] = {
    "the compare-and-set loop and the writes on a revision": (
        r"KeyWrongLastSequenceError|WRONG_LAST_SEQUENCE|range\(CAS_RETRIES\)|\.(update|delete)\([^)]*last=",
        {"shared/nats/jetstream.py", "shared/nats/cas.py"},
    ),
    # (a client's own watch method, self.watch, is not a bucket's)
    "watching a KV bucket": (r"(?<!self)\.watch\(|\.watchall\(|LAST_PER_SUBJECT", {"shared/nats/watch.py"}),
    "creating a bucket": (r"create_key_value\(", {"shared/nats/jetstream.py"}),
    "classifying NATS failures": (
        r"StaleConnectionError|ServiceUnavailableError|ConnectionClosedError|OutboundBufferLimitError",
        {"shared/nats/failures.py"},
    ),
    "strict MCP tool arguments": (
        r"[\"']additionalProperties[\"']: False|validate_arguments\(",
        {"shared/mcp/tools.py"},
    ),
    "the NATS URL schemes": (r"\(\"nats\", \"tls\"", {"shared/settings.py"}),
    "the JetStream API prefix": (r"\$JS\.API", {"shared/names.py"}),
    "id and token patterns": (
        r"\[a-z0-9\]\[a-z0-9|\[0-9a-f\]\{(16|32)\}|\[a-z0-9-\]\{1,64\}",
        {"shared/names.py", "shared/legacy.py", "shared/identity.py"},  # the last two: in prose only
    ),
    "a pydantic base of shared records": (r"^class \w+\(BaseModel\)", {"shared/base.py"}),  # shared/ only
    "a project's subject, stream or bucket name": (
        r"f[\"'](loom[.-]\{|LOOM-\{|\$KV\.)",
        {"shared/names.py"},
    ),
}

SHARED_ONLY = {"a pydantic base of shared records"}
"""Ideas whose rule is about shared/ alone (Weft's routes and Pattern's results have response
models of their own)."""


def _sources() -> dict[str, str]:
    tracked = subprocess.run(
        ["git", "ls-files", *(f"{part}/*.py" for part in PARTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {name: (ROOT / name).read_text() for name in tracked}


SOURCES = _sources()


@pytest.mark.parametrize("idea", sorted(HOMES))
def test_each_idea_has_one_home(idea: str) -> None:
    pattern, homes = HOMES[idea]
    found = re.compile(pattern, re.MULTILINE)
    scope = "shared/" if idea in SHARED_ONLY else ""
    elsewhere = sorted(
        name
        for name, text in SOURCES.items()
        if name.startswith(scope) and name not in homes and found.search(text)
    )
    assert elsewhere == [], f"{idea}: outside its home in {elsewhere}"


@pytest.mark.parametrize("idea", sorted(HOMES))
def test_each_home_still_holds_its_idea(idea: str) -> None:
    """A home that no longer holds the idea means the table is stale (or the idea moved)."""
    pattern, homes = HOMES[idea]
    found = re.compile(pattern, re.MULTILINE)
    assert any(found.search(SOURCES[home]) for home in homes), f"{idea}: in none of {sorted(homes)}"
