"""``shuttle notify`` against a real Weft and a real receiver (testsupport/receivers.py):
a sink set (its URL read from stdin too), listed by scheme only, tested, failing shown,
removed; refusals that name the option and never repeat the URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from shuttle_helpers import Cli

from testsupport.receivers import Receiver, http_receiver_in_thread


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with http_receiver_in_thread() as running:  # Shuttle's commands block the test's loop
        yield running


async def test_an_operator_sets_tests_lists_and_removes_sinks(cli: Cli, receiver: Receiver) -> None:
    host = receiver.url.removeprefix("http://")
    url = f"json://{host}/ops?token=hidden-in-url"
    said = cli("notify", "set", "ops", url, "--floor", "P0", "--event", "question", "--test")
    assert said.exit_code == 0, said.stderr
    assert "sink ops set (apprise, json)" in said.stdout and "a test notice was delivered" in said.stdout
    assert "hidden-in-url" not in said.stdout + said.stderr
    assert (await receiver.wait_for("/ops"))[0].json()["title"] == "Loom: a test notice for sink ops"

    receiver.failing.add("/down")
    piped = cli("notify", "set", "down", "-", input=f"json://{host}/down\n")
    assert piped.exit_code == 0, piped.stderr
    failed = cli("notify", "test", "down")
    assert failed.exit_code == 1 and "the service answered HTTP 500" in failed.stdout
    listed = cli("notify", "list")
    assert (
        "json" in listed.stdout and "failing since" in listed.stdout and "hidden-in-url" not in listed.stdout
    )
    assert cli("notify", "list", "-q").stdout.split() == ["down", "ops"]
    assert cli.json("notify", "list")["items"][1]["min_priority"] == "P0"

    no_secret = cli("notify", "set", "hook", f"{receiver.url}/hook", "--webhook")
    assert no_secret.exit_code == 1 and "secret" in no_secret.stderr
    assert cli("notify", "set", "x", url, "--event", "gossip").exit_code == 2
    bad = cli("notify", "set", "x", "not a url hidden-in-url")
    assert bad.exit_code == 1 and "url" in bad.stderr and "hidden-in-url" not in bad.stderr
    assert cli("notify", "remove", "ops").exit_code == 0
    assert cli("notify", "remove", "ops").exit_code == 1
    assert cli("notify", "list", "-q").stdout.split() == ["down"]
