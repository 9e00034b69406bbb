"""shared.nats.failures: the one classifier of NATS failures every part answers with."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import nats.errors
import nats.js.errors
import pytest

from shared.errors import LoomError, Unavailable
from shared.nats import failures as f
from shared.nats.client import NatsConnectError, connect
from shared.nats.server import EmbeddedNatsServer
from testsupport.natsfailures import FAILURES, SECRET

URL = "nats://alice:hunter2pass@nats.example:4222"


def test_every_class_it_names_has_an_example() -> None:
    """The parts' parity tests run over ``FAILURES``: it must hold each class the classifier knows."""
    examples = [make() for make, _ in FAILURES.values()]
    named = (*f.TIMEOUTS, *f.UNREACHABLE, *f.JETSTREAM_DOWN, *f.REFUSALS)
    missing = [
        cls.__name__
        for cls in named
        if not any(type(e) is cls or (cls is f.JetStreamRefused and isinstance(e, cls)) for e in examples)
    ]
    assert missing == []


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_each_failure_has_its_code_and_kind(name: str) -> None:
    make, code = FAILURES[name]
    found = f.nats_failure(make())
    assert found is not None and found.code == code
    if code == f.NATS_UNAVAILABLE:
        assert isinstance(found, f.NatsUnavailable) and isinstance(found, Unavailable)
    else:
        assert isinstance(found, f.JetStreamRefused) and not isinstance(found, Unavailable)


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_messages_name_no_secret_and_say_what_was_under_way(name: str) -> None:
    make, code = FAILURES[name]
    found = f.nats_failure(make(), nats_url=URL, doing="storing the memory", retry="Retry soon.")
    assert found is not None
    assert "hunter2pass" not in found.message and "alice" not in found.message
    assert SECRET not in found.message
    assert " while storing the memory" in found.message
    if code == f.NATS_UNAVAILABLE:
        assert "nats://nats.example:4222" in found.message  # the display form, credential-free
        assert found.message.endswith(". Retry soon.")
    else:
        assert "Retry soon." not in found.message  # a refusal does not pass by retrying
        assert found.message.startswith("NATS refused the operation while storing the memory: ")


def test_the_wording_of_each_kind() -> None:
    stale = f.nats_failure(nats.errors.StaleConnectionError())
    assert stale is not None and stale.message == "NATS is unreachable (StaleConnectionError)"
    late = f.nats_failure(TimeoutError(), nats_url="nats://127.0.0.1:4222")
    assert late is not None
    assert late.message == (
        "NATS at nats://127.0.0.1:4222 did not answer in time; the operation may not have happened"
    )
    down = f.nats_failure(FAILURES["jetstream-503"][0]())
    assert down is not None and down.message == "JetStream is unavailable (JetStream not enabled)"
    # no stream answered: in a cluster, most often a stream between leaders, not JetStream off
    leaderless = f.nats_failure(nats.js.errors.NoStreamResponseError())
    assert leaderless is not None and leaderless.message == (
        "JetStream is unavailable (no stream answered: "
        "JetStream is not enabled, or the stream has no leader yet)"
    )
    refused = f.nats_failure(FAILURES["jetstream-not-found"][0]())
    assert isinstance(refused, f.JetStreamRefused)
    assert refused.message == "NATS refused the operation: stream not found"
    assert refused.description == "stream not found"


def test_a_classified_failure_classifies_the_same() -> None:
    """A part may meet a failure another layer already classified (re-raised): same answer."""
    once = f.nats_failure(nats.errors.NoRespondersError(), retry="Retry.")
    assert once is not None and f.nats_failure(once) is once
    refused = f.nats_failure(FAILURES["jetstream-reply"][0]())
    assert refused is not None
    again = f.nats_failure(refused, doing="reading")
    assert again is not None and again.code == f.JETSTREAM_ERROR
    assert again.message == "NATS refused the operation while reading: No Messages"


class _Bug(Exception):
    pass


@pytest.mark.parametrize(
    "make",
    [
        lambda: RuntimeError("token=abc"),
        lambda: KeyError("x"),
        _Bug,
        nats.errors.BadSubjectError,
        nats.errors.MaxPayloadError,
        lambda: LoomError("a refusal of ours"),
        lambda: NatsConnectError("cannot connect to NATS"),  # already ours: the part shows it as it is
    ],
)
def test_anything_else_is_not_a_nats_failure(make: Callable[[], BaseException]) -> None:
    assert f.nats_failure(make()) is None


async def test_real_failures_of_a_real_server(nats_server: EmbeddedNatsServer, project_id: str) -> None:
    nc = await connect(url=nats_server.url)
    caught: list[BaseException] = []
    try:
        try:
            await nc.request(f"nobody.{project_id}", b"", timeout=2)
        except Exception as exc:
            caught.append(exc)
        await nc.subscribe(f"silent.{project_id}")  # listens, never answers
        try:
            await nc.request(f"silent.{project_id}", b"", timeout=0.2)
        except Exception as exc:
            caught.append(exc)
        try:
            await nc.jetstream().stream_info(f"NO-SUCH-{project_id}")
        except Exception as exc:
            caught.append(exc)
    finally:
        await nc.close()
    try:
        await nc.publish("after.close", b"")
    except Exception as exc:
        caught.append(exc)
    codes = [(type(e).__name__, getattr(f.nats_failure(e), "code", None)) for e in caught]
    assert codes == [
        ("NoRespondersError", f.NATS_UNAVAILABLE),
        ("TimeoutError", f.NATS_UNAVAILABLE),
        ("NotFoundError", f.JETSTREAM_ERROR),
        ("ConnectionClosedError", f.NATS_UNAVAILABLE),
    ]


def test_shared_errors_stays_free_of_nats() -> None:
    """Shuttle imports shared.errors and never NATS: the classifier lives apart."""
    probe = "import sys, shared.errors; print('nats' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
