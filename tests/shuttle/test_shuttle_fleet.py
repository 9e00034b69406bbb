"""``agents``, ``fleet``, ``stats``, ``projects``, ``version`` and the auth and
project plumbing, against a real Weft on a real nats-server."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agent_side import Agent, until
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli
from synadia_ai.agent_service import AgentService, PromptStream
from synadia_ai.agents import Envelope

from shared.models import ControlRequest

B = "b" * 32
C = "c" * 32


async def fleet_of_three(cli: Cli, nc: NatsClient) -> list[Agent]:
    agents = [
        Agent(nc, cli.project, "a" * 32, ("code",)),
        Agent(nc, cli.project, B, ("code", "review")),
        Agent(nc, cli.project, C, ("docs",)),
    ]
    await agents[0].register(agent_type="claude-code")
    await agents[1].register(agent_type="claude-code", status="busy", current_tasks=1)
    await agents[2].register(agent_type="copilot", boundaries=["corporate"])
    await until(lambda: len(cli.json("agents", "list")["items"]) == 3, what="Weft to see three agents")
    return agents


def api_get(cli: Cli, path: str, **params: Any) -> Any:
    with cli.weft.api(cli.project) as api:
        response = api.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


async def test_agents_protocol_lists_the_other_agents_of_the_agent_protocol(cli: Cli, nc: NatsClient) -> None:
    """``shuttle agents protocol`` (docs/interop.md); the agent answers discovery from this
    test's loop, so every Shuttle run happens in a thread."""

    async def echo(envelope: Envelope, stream: PromptStream) -> None:
        await stream.send(envelope.prompt)

    owner = f"erin-{uuid.uuid4().hex[:8]}"
    service = AgentService(
        agent="copilot-cli",
        owner=owner,
        session_name="triage",
        nc=nc,
        description="Copilot CLI triaging issues",
        heartbeat_interval_s=1,
    )
    service.on_prompt(echo)
    await service.start()
    try:

        def heard() -> list[dict[str, Any]]:
            items = cli.json("agents", "protocol")["items"]
            return [i for i in items if i["owner"] == owner and i["online"]]

        [found] = await until(heard, timeout=30, what="Shuttle to list the protocol's agent, heard from")
        assert (found["agent"], found["session_name"]) == ("copilot-cli", "triage")
        shown = await asyncio.to_thread(cli, "agents", "protocol")
        assert shown.exit_code == 0, shown.stderr
        assert all(text in shown.stdout for text in ("triage", "copilot-cli", owner)), shown.stdout
        quiet = await asyncio.to_thread(cli, "agents", "protocol", "-q")
        assert f"agents.prompt.copilot-cli.{owner}.triage" in quiet.stdout.split()
    finally:
        await service.stop()


async def test_agents_list_show_and_filters(cli: Cli, nc: NatsClient) -> None:
    await fleet_of_three(cli, nc)
    listed = cli.json("agents", "list")
    direct = api_get(cli, "/api/agents")
    assert [a["agent_id"] for a in listed["items"]] == [a["agent_id"] for a in direct["items"]]
    ids = lambda *args: sorted(a["agent_id"] for a in cli.json("agents", "list", *args)["items"])  # noqa: E731
    assert ids("--type", "copilot") == [C]
    assert ids("--status", "busy") == [B]
    assert ids("--capability", "review") == [B]
    assert ids("--boundary", "corporate") == [C]
    assert ids("--limit", "1", "--all") == sorted(["a" * 32, B, C])
    shown = cli.json("agents", "show", B)
    assert (
        shown["agent_id"] == B and shown["status"] == "busy" and shown["capabilities"] == ["code", "review"]
    )
    r = cli("agents", "list")
    assert r.exit_code == 0 and all(x in r.stdout for x in (B, C, "copilot", "busy"))
    r = cli("agents", "show", C)
    assert r.exit_code == 0 and "copilot" in r.stdout
    r = cli("agents", "show", "d" * 32)
    assert (
        r.exit_code == 1
        and r.stderr == "shuttle: error: agent_id: no agent with this id is registered in this project\n"
    )
    r = cli("agents", "list", "-q")
    assert sorted(r.stdout.split()) == sorted(["a" * 32, B, C])


async def test_agents_shutdown_reaches_the_agent(cli: Cli, nc: NatsClient) -> None:
    agents = await fleet_of_three(cli, nc)
    received: asyncio.Queue[tuple[str, ControlRequest]] = asyncio.Queue()

    async def on_control(msg: Any) -> None:
        await received.put((msg.subject, ControlRequest.model_validate_json(msg.data)))

    subs = [await nc.subscribe(a.names.control_subject(a.agent_id), cb=on_control) for a in agents]
    await nc.flush()
    try:
        r = await asyncio.to_thread(cli, "agents", "shutdown", B, "--reason", "maintenance", "--grace", "5")
        assert r.exit_code == 0, r.stderr
        assert f"{B} asked to shut down" in r.stdout
        subject, request = await asyncio.wait_for(received.get(), 10)
        assert subject == agents[0].names.control_subject(B)
        assert request.action == "shutdown" and request.reason == "maintenance" and request.grace_s == 5
        doc = await asyncio.to_thread(cli.json, "agents", "shutdown", "a" * 32, C)
        assert doc["succeeded"] == 2
        got = {(await asyncio.wait_for(received.get(), 10))[0] for _ in range(2)}
        assert got == {agents[0].names.control_subject("a" * 32), agents[0].names.control_subject(C)}
        r = await asyncio.to_thread(cli, "agents", "shutdown", C, "d" * 32)
        assert r.exit_code == 1 and "1 of 2 refused" in r.stderr and "d" * 32 in r.stderr
        assert f"{C} asked to shut down" in r.stdout
    finally:
        for sub in subs:
            await sub.unsubscribe()


async def test_fleet_json_agrees_with_stats_and_agents(cli: Cli, nc: NatsClient) -> None:
    agents = await fleet_of_three(cli, nc)
    for n in range(3):
        cli.json("submit", f"task {n}", "-c", "code")
    cli.json("submit", "write docs", "-c", "docs")
    claimed = await agents[0].claim()
    await agents[0].queue.complete(claimed.id, agents[0].agent_id, None)
    await until(lambda: cli.json("stats")["work"]["by_status"]["completed"] == 1, what="stats to count it")
    fleet = cli.json("fleet")
    stats = api_get(cli, "/api/stats")
    listed = api_get(cli, "/api/agents", limit=1000)
    assert fleet["stats"] == stats
    assert fleet["project_id"] == cli.project == stats["project_id"]
    key = lambda a: (a["agent_id"], a["status"], a["agent_type"])  # noqa: E731
    assert sorted(map(key, fleet["agents"])) == sorted(map(key, listed["items"]))
    assert stats["agents"]["by_status"] == {"online": 2, "busy": 1, "offline": 0}
    assert stats["agents"]["by_type"] == {"claude-code": {"online": 1, "busy": 1}, "copilot": {"online": 1}}
    assert stats["work"]["by_status"]["queued"] == 3 and stats["queue_depths"] == {"code": 2, "docs": 1}
    assert fleet["targets"] == []
    r = cli("fleet")
    assert r.exit_code == 0
    for text in ("Loom fleet", cli.project, "claude-code", "copilot", B, "queues", "docs"):
        assert text in r.stdout
    r = cli.proc("fleet", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["stats"]["agents"] == stats["agents"]


async def test_fleet_watch_redraws_on_events(cli: Cli, nc: NatsClient) -> None:
    proc = cli.popen("fleet", "--watch", "--json")
    assert proc.stdout is not None
    first = json.loads(await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30))
    assert first["stats"]["work"]["total"] == 0
    try:
        await asyncio.to_thread(cli.json, "submit", "live", "-c", "code")
        while True:
            doc = json.loads(await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30))
            if doc["stats"]["work"]["total"] == 1:
                break
        agent = Agent(nc, cli.project)
        await agent.register()
        while True:
            doc = json.loads(await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30))
            if [a["agent_id"] for a in doc["agents"]] == [agent.agent_id]:
                break
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.communicate, timeout=30)


async def test_stats_and_projects(cli: Cli) -> None:
    cli.json("submit", "count me", "-c", "code")
    assert cli.json("stats") == api_get(cli, "/api/stats")
    r = cli("stats")
    assert r.exit_code == 0 and cli.project in r.stdout and "queues" in r.stdout
    projects = cli.json("projects")

    def ours(listing: dict[str, Any]) -> dict[str, Any]:
        """The listing without other tests' projects, which come and go on the shared server
        between the two reads."""
        mine = {cli.project, "shuttle-default"}
        return listing | {"projects": [p for p in listing["projects"] if p["project_id"] in mine]}

    assert ours(projects) == ours(api_get(cli, "/api/stats/projects"))
    assert len(ours(projects)["projects"]) == 2
    assert cli.project in [p["project_id"] for p in projects["projects"]]
    assert projects["default_project"] == "shuttle-default"
    r = cli("projects", "-q")
    assert cli.project in r.stdout.split()
    r = cli("projects")
    assert r.exit_code == 0 and cli.project in r.stdout


async def test_version_server(cli: Cli) -> None:
    doc = cli.json("version", "--server")
    health = api_get(cli, "/health")
    assert doc["weft"] == health["version"] and doc["api_url"] == cli.weft.url
    r = cli("version", "--server")
    assert r.exit_code == 0 and f"weft {health['version']} at {cli.weft.url}" in r.stdout


REST_401 = (
    "shuttle: error: the bearer token given is not one this Weft accepts (Authorization: Bearer <token>; "
    "one of WEFT_API_TOKENS)\n"
)
REST_401_NONE = (
    "shuttle: error: a bearer token is required and none was given (Authorization: Bearer <token>)\n"
)
WS_HOW = "Sec-WebSocket-Protocol: bearer, <token>; or ?token=<token>; or Authorization: Bearer <token>"
WS_401 = f"shuttle: error: the token given is not one this Weft accepts ({WS_HOW}; one of WEFT_API_TOKENS)\n"
WS_401_NONE = f"shuttle: error: a token is required and none was given ({WS_HOW})\n"


async def test_wrong_or_missing_token_is_exit_1_with_weft_message(cli: Cli) -> None:
    """The exact line (issue 21: redaction had turned "bearer token" into "bearer ***")."""
    for args, line in (
        (["work", "list"], REST_401),
        (["fleet", "--json"], REST_401),
        (["submit", "x", "-c", "code"], REST_401),
        (["watch", "0" * 32], WS_401),  # the event stream (WebSocket) comes first
    ):
        r = cli(*args, env={"LOOM_API_TOKEN": "wrong-token"})
        assert (r.exit_code, r.stderr) == (1, line), args
    with cli.weft.api(cli.project, token="wrong-token") as api:
        assert api.get("/api/work").json()["message"] == REST_401.removeprefix("shuttle: error: ").strip()
    r = cli.proc("stats", env={"LOOM_API_TOKEN": "wrong-token"})
    assert (r.exit_code, r.stderr) == (1, REST_401)
    r = cli("--token", "", "stats", env={"LOOM_API_TOKEN": ""})
    assert (r.exit_code, r.stderr) == (1, REST_401_NONE)  # none given is told apart from a wrong one
    r = cli("--token", "", "watch", "0" * 32, env={"LOOM_API_TOKEN": ""})
    assert (r.exit_code, r.stderr) == (1, WS_401_NONE)


async def test_project_is_sent_and_isolates(cli: Cli, project_id: str) -> None:
    work_id = cli.json("submit", "mine", "-c", "code")["id"]
    other = f"{project_id}-other"
    r = cli("--project", other, "work", "show", work_id)
    assert r.exit_code == 1 and "no work item" in r.stderr
    assert cli.json("--project", other, "work", "list")["items"] == []
    assert [i["id"] for i in cli.json("work", "list")["items"]] == [work_id]
    r = cli("--project", other, "stats", "--json")
    assert json.loads(r.stdout)["project_id"] == other


@pytest.fixture
def sigint_reaches_children() -> Iterator[None]:
    """A test run started in the background by a shell without job control (as CI may be)
    inherits SIGINT ignored, and so would every child: Python then installs no Ctrl-C
    handler and the child rightly ignores SIGINT. Handling it here resets the children's."""
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_reaches_children")
async def test_fleet_watch_screen_stops_cleanly_on_ctrl_c(cli: Cli) -> None:
    """Piped, ``fleet --watch`` appends one screen per change; Ctrl-C ends it with 130."""
    proc = cli.popen("fleet", "--watch")
    assert proc.stdout is not None

    async def line() -> str:
        text = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)  # type: ignore[union-attr]
        assert text, "fleet --watch ended"
        return text

    try:
        assert (await line()).startswith("Loom fleet")  # the first screen is drawn
        await asyncio.to_thread(cli.json, "submit", "seen live", "-c", "code")
        while "waiting for an agent" not in await line():  # a later screen shows the new item
            pass
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in stderr
