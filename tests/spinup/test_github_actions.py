"""``github-actions`` mechanism against a recording stub of the GitHub REST API."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import SpinupState, Target, WorkSubmission
from shared.names import ProjectNames
from shared.redact import install_redaction
from tests.spinup.conftest import EngineFactory, eventually, register_agent
from tests.spinup.stubs import Seen, StubServer
from testsupport.work import work_queue
from weft.spinup.mechanisms import parse_config
from weft.spinup.mechanisms.base import Launch, MechanismError
from weft.spinup.mechanisms.github_actions import GithubActionsMechanism

TOKEN = "ghp_FAKEtokenFAKEtoken0123456789abcd"
REPO = "/repos/acme/agents"
MakeTarget = Callable[..., Awaitable[Target]]


class FakeGithub:
    """Workflow runs appear on the second listing after a dispatch; other people's runs are there too."""

    def __init__(self) -> None:
        self.dispatched: list[dict[str, Any]] = []
        self.listings = 0
        self.cancelled: list[str] = []

    def answer(self, seen: Seen) -> tuple[int, Any]:
        if seen.headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, {"message": f"Bad credentials {seen.headers.get('Authorization')}"}
        if seen.method == "POST" and seen.path == f"{REPO}/actions/workflows/agent.yml/dispatches":
            self.dispatched.append(seen.json())
            return 204, None
        if seen.method == "GET" and seen.path == f"{REPO}/actions/workflows/agent.yml/runs":
            self.listings += 1
            runs = [
                {
                    "id": 999,
                    "name": "agent someone-else",
                    "display_title": "agent someone-else",
                    "status": "queued",
                },
            ]
            if self.listings >= 2:
                for n, body in enumerate(self.dispatched):
                    correlation = body["inputs"]["correlation_id"]
                    runs.append(
                        {
                            "id": 1000 + n,
                            "name": "Loom agent",
                            "display_title": f"loom agent {correlation}",
                            "status": "in_progress",
                            "html_url": f"https://github.test/acme/agents/actions/runs/{1000 + n}",
                        }
                    )
            runs.append(
                {"id": 5000, "name": "newest run of someone", "display_title": "x", "status": "queued"}
            )
            return 200, {"total_count": len(runs), "workflow_runs": runs}
        if seen.method == "POST" and seen.path.endswith("/cancel"):
            run_id = seen.path.split("/")[-2]
            if run_id in self.cancelled:
                return 409, {"message": "Cannot cancel a workflow run that is completed."}
            self.cancelled.append(run_id)
            return 202, {}
        if seen.method == "GET" and seen.path.startswith(f"{REPO}/actions/runs/"):
            run_id = seen.path.split("/")[-1]
            return 200, {
                "id": int(run_id),
                "status": "completed" if run_id in self.cancelled else "in_progress",
            }
        if seen.method == "GET" and seen.path == f"{REPO}/actions/workflows/agent.yml":
            return 200, {"id": 77, "name": "Loom agent", "state": "active"}
        if seen.method == "GET" and seen.path == f"{REPO}/actions/workflows/gone.yml":
            return 404, {"message": "Not Found"}
        if seen.method == "GET" and seen.path == REPO:
            return 200, {
                "full_name": "acme/agents",
                "permissions": {"admin": False, "push": True, "pull": True},
            }
        if seen.method == "GET" and seen.path == "/repos/acme/readonly":
            return 200, {"full_name": "acme/readonly", "permissions": {"push": False, "pull": True}}
        if seen.method == "GET" and seen.path == "/repos/acme/readonly/actions/workflows/agent.yml":
            return 200, {"id": 78, "state": "active"}
        return 404, {"message": "Not Found"}


@pytest.fixture
async def github() -> AsyncIterator[tuple[StubServer, FakeGithub]]:
    fake = FakeGithub()
    server = await StubServer(fake.answer).start()
    try:
        yield server, fake
    finally:
        await server.stop()


def gh_config(server: StubServer, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "repository": "acme/agents",
        "workflow": "agent.yml",
        "ref": "release",
        "token_env": "LOOM_TEST_GH_TOKEN",
        "api_url": server.url,
        "inputs": {"model": "large", "note": "for {target_name}"},
        "nats_url": "wss://nats.example.com:443",
        "run_lookup_interval_s": 0.05,
        "run_lookup_timeout_s": 5,
    }
    config.update(changes)
    return config


LAUNCH = Launch(
    spinup_id="5" * 32,
    agent_id="a" * 32,
    project_id="proj-1",
    target_id="7" * 32,
    target_name="gh-runner",
    nats_url="wss://nats.example.com:443",
    work_id="9" * 32,
)


async def test_dispatch_finds_its_own_run_by_correlation_id_and_cancels_it(
    github: tuple[StubServer, FakeGithub], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = github
    monkeypatch.setenv("LOOM_TEST_GH_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    install_redaction()
    config = parse_config("github-actions", gh_config(server))
    mechanism = GithubActionsMechanism()
    handles: list[dict[str, str]] = []

    async def remember(handle: dict[str, str]) -> None:
        handles.append(dict(handle))

    before = datetime.now().astimezone()
    handle = await mechanism.start(config, LAUNCH, remember)

    [dispatch] = server.calls("POST", f"{REPO}/actions/workflows/agent.yml/dispatches")
    assert dispatch.json() == {
        "ref": "release",
        "inputs": {
            "correlation_id": "5" * 32,
            "agent_id": "a" * 32,
            "project_id": "proj-1",
            "target_id": "7" * 32,
            "work_id": "9" * 32,
            "nats_url": "wss://nats.example.com:443",
            "model": "large",
            "note": "for gh-runner",
        },
    }
    assert dispatch.headers["Authorization"] == f"Bearer {TOKEN}"
    assert dispatch.headers["Accept"] == "application/vnd.github+json"
    listings = server.calls("GET", f"{REPO}/actions/workflows/agent.yml/runs")
    assert len(listings) == 2  # polled until its own run appeared
    query = listings[0].query
    assert query["event"] == "workflow_dispatch" and query["created"].startswith(">=")
    since = datetime.fromisoformat(query["created"][2:].replace("Z", "+00:00"))
    assert since <= before  # from (a little before) the dispatch, never "the latest run"
    assert handle["run_id"] == "1000" and handle["correlation_id"] == "5" * 32
    assert handle["run_url"].endswith("/runs/1000")
    assert handles[0].get("run_id") is None and handles[-1]["run_id"] == "1000"

    assert await mechanism.alive(config, handle) is True
    assert await mechanism.stop(config, handle) == "workflow run 1000 cancelled"
    assert [c.path for c in server.calls("POST", f"{REPO}/actions/runs/")] == [
        f"{REPO}/actions/runs/1000/cancel"
    ]
    assert await mechanism.alive(config, handle) is False
    assert await mechanism.stop(config, handle) == "workflow run 1000 had already finished"
    assert TOKEN not in caplog.text and all(TOKEN not in r.getMessage() for r in caplog.records)


async def test_run_never_found_is_a_failed_start_and_stop_finds_it_later(
    github: tuple[StubServer, FakeGithub], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, fake = github
    monkeypatch.setenv("LOOM_TEST_GH_TOKEN", TOKEN)
    fake.listings = -100  # the run does not show up within the lookup time
    config = parse_config("github-actions", gh_config(server, run_lookup_timeout_s=0.2))
    handles: list[dict[str, str]] = []

    async def remember(handle: dict[str, str]) -> None:
        handles.append(dict(handle))

    with pytest.raises(MechanismError, match=r"no run carrying correlation id 5{32}"):
        await GithubActionsMechanism().start(config, LAUNCH, remember)
    assert "run-name must include ${{ inputs.correlation_id }}" in str(
        await _error_of(GithubActionsMechanism().start(config, LAUNCH, remember))
    )
    fake.listings = 5  # now it is there: stopping the failed operation cancels that run
    note = await GithubActionsMechanism().stop(config, handles[0])
    assert note == "workflow run 1000 cancelled"


async def _error_of(call: Awaitable[Any]) -> BaseException:
    try:
        await call
    except BaseException as exc:
        return exc
    raise AssertionError("expected a failure")


async def test_bad_token_and_missing_token_never_show_the_token(
    github: tuple[StubServer, FakeGithub], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = github
    monkeypatch.setenv("LOOM_TEST_GH_TOKEN", "ghp_WRONGwrongWRONGwrong0123456789ab")
    config = parse_config("github-actions", gh_config(server))
    failure = await _error_of(GithubActionsMechanism().start(config, LAUNCH, _ignore))
    assert "GitHub refused the workflow dispatch (401)" in str(failure)
    assert "ghp_WRONGwrongWRONGwrong0123456789ab" not in str(failure)
    monkeypatch.delenv("LOOM_TEST_GH_TOKEN")
    missing = await _error_of(GithubActionsMechanism().start(config, LAUNCH, _ignore))
    assert str(missing) == "config.token_env: environment variable LOOM_TEST_GH_TOKEN is not set in Weft"


async def _ignore(_: dict[str, str]) -> None:
    return None


async def test_probe_checks_the_workflow_and_the_token_can_dispatch(
    github: tuple[StubServer, FakeGithub], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = github
    monkeypatch.setenv("LOOM_TEST_GH_TOKEN", TOKEN)
    mechanism = GithubActionsMechanism()
    ok = await mechanism.probe(parse_config("github-actions", gh_config(server)), 5)
    assert ok.ok is True and ok.detail == "workflow agent.yml of acme/agents can be dispatched"
    gone = await mechanism.probe(parse_config("github-actions", gh_config(server, workflow="gone.yml")), 5)
    assert gone.ok is False and gone.detail == "workflow gone.yml not found in acme/agents (404)"
    readonly = await mechanism.probe(
        parse_config("github-actions", gh_config(server, repository="acme/readonly")), 5
    )
    assert readonly.ok is False and "cannot dispatch workflows of acme/readonly" in readonly.detail


async def test_credentials_in_the_agent_url_are_not_sent_as_an_input(
    github: tuple[StubServer, FakeGithub], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, fake = github
    monkeypatch.setenv("LOOM_TEST_GH_TOKEN", TOKEN)
    config = parse_config("github-actions", gh_config(server))
    launch = Launch(**{**LAUNCH.__dict__, "nats_url": "wss://agent:hunter2@nats.example.com:443"})
    await GithubActionsMechanism().start(config, launch, _ignore)
    assert "nats_url" not in fake.dispatched[0]["inputs"]
    assert "hunter2" not in str(server.requests)


async def test_engine_dispatches_links_the_runner_agent_and_cancels_the_run_when_idle(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    github: tuple[StubServer, FakeGithub],
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, fake = github
    monkeypatch.setenv("LOOM_TEST_GH_TOKEN", TOKEN)
    engine = await engine_factory(shutdown_grace_s=0.3)
    target = await make_target(
        name="gh-runner", mechanism="github-actions", config=gh_config(server), idle_timeout_s=0.5
    )
    item = await work_queue(nc, names).submit(WorkSubmission(task_id="g", description="d", capability="code"))
    decision = await engine.request_for_work(project_id, item)
    op = decision.operation
    assert op is not None, decision.detail
    manager = await engine.manager(project_id)

    async def state(*wanted: SpinupState) -> Any:
        record = await manager.store.get(op.id)
        return record if record.op.state in wanted and record.op.handle.get("run_id") else None

    running = await eventually(lambda: state(SpinupState.RUNNING), what="the run to be found")
    assert fake.dispatched[0]["inputs"]["correlation_id"] == op.id
    assert fake.dispatched[0]["inputs"]["agent_id"] == op.agent_id
    run_id = running.op.handle["run_id"]

    await register_agent(
        nc, project_id, op.agent_id, spinup_id=op.id, target_id=target.id, capabilities=["code"]
    )
    await eventually(lambda: state(SpinupState.STOPPED), what="idle shutdown")
    assert fake.cancelled == [run_id]
