"""Fixtures for the shared-package tests.

The servers themselves come from ``testsupport.servers`` (loaded by the root
conftest); what is here is only needed by these tests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testsupport.env import strip_fabric


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read the environment; a developer's own NATS_URL or LOOM_* must not leak in."""
    strip_fabric(monkeypatch)


@pytest.fixture(scope="session")
def other_ca_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that did not sign the test server's certificate."""
    import trustme

    path = tmp_path_factory.mktemp("other-ca") / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Capture every logger (loom.*, nats.*, asyncio) at DEBUG, without the redacting
    filter, so a test sees what the code itself emits."""
    caplog.set_level(logging.DEBUG)
    for name in ("loom", "loom.nats", "loom.nats-server", "nats", "nats.aio.client", "nats.js.kv"):
        caplog.set_level(logging.DEBUG, logger=name)
    yield caplog


@pytest.fixture
def log_text(debug_logs: pytest.LogCaptureFixture) -> Callable[[], str]:
    """Everything captured so far: formatted text (with tracebacks), raw messages and arguments."""

    def collect() -> str:
        parts = [debug_logs.text]
        for record in debug_logs.records:
            parts.append(record.getMessage())
            parts.append(repr(record.args))
            if record.exc_text:
                parts.append(record.exc_text)
        return "\n".join(parts)

    return collect
