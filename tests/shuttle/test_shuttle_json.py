"""Every command that prints data prints exactly one parseable JSON document
with ``--json`` (nothing else on stdout), in-process and as a process."""

from __future__ import annotations

import json

import pytest
from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli


async def populated(cli: Cli, nc: NatsClient) -> dict[str, str]:
    agent = Agent(nc, cli.project)
    await agent.register()
    work_id = cli.json("submit", "json me", "-c", "code")["id"]
    dead_id = cli.json("submit", "bury me", "-c", "code", "--max-attempts", "1")["id"]
    claimed = await agent.claim()
    while claimed.id != dead_id:  # same priority: take both, bury the right one
        other = claimed
        claimed = await agent.claim()
        await agent.queue.complete(other.id, agent.agent_id, None)
    await agent.queue.fail(dead_id, agent.agent_id, "buried")
    target_id = cli.json("targets", "add", "jt", "-m", "local", "--command", "warp")["id"]
    return {"work": work_id, "dead": dead_id, "agent": agent.agent_id, "target": target_id}


DATA_COMMANDS = [
    ["work", "list"],
    ["work", "show", "{work}"],
    ["agents", "list"],
    ["agents", "show", "{agent}"],
    ["dlq", "list"],
    ["targets", "list"],
    ["targets", "show", "{target}"],
    ["targets", "update", "jt", "--tag", "x"],
    ["targets", "disable", "jt"],
    ["targets", "enable", "jt"],
    ["stats"],
    ["projects"],
    ["fleet"],
    ["config", "list"],
    ["config", "get", "api_url"],
    ["config", "path"],
    ["version"],
    ["version", "--server"],
    ["submit", "another", "-c", "code"],
    ["watch", "{work}"],  # completed already: one NDJSON line
    ["dlq", "retry", "{dead}"],
    ["work", "cancel", "{dead}"],
]


@pytest.mark.parametrize("as_process", [False, True], ids=["in-process", "process"])
async def test_every_data_command_prints_json(cli: Cli, nc: NatsClient, as_process: bool) -> None:
    ids = await populated(cli, nc)
    for template in DATA_COMMANDS:
        args = [a.format(**ids) for a in template]
        r = (cli.proc if as_process else cli)(*args, "--json")
        assert r.exit_code == 0, (args, r.stderr)
        lines = [line for line in r.stdout.splitlines() if line.strip()]
        if args[0] == "watch":
            assert all(isinstance(json.loads(line), dict) for line in lines), args
        else:
            assert isinstance(json.loads(r.stdout), dict), args
    r = (cli.proc if as_process else cli)("--json", "work", "list")  # the global flag works too
    assert json.loads(r.stdout)["items"]


async def test_every_command_has_help() -> None:
    from shuttle_helpers import run

    commands = [
        [], ["submit"], ["watch"], ["fleet"], ["spin-up"], ["stats"], ["projects"], ["version"],
        ["agents", "list"], ["agents", "show"], ["agents", "shutdown"],
        ["work", "list"], ["work", "show"], ["work", "cancel"], ["work", "retry"],
        ["targets", "list"], ["targets", "show"], ["targets", "add"], ["targets", "update"],
        ["targets", "remove"], ["targets", "enable"], ["targets", "disable"], ["targets", "test"],
        ["dlq", "list"], ["dlq", "retry"], ["dlq", "discard"],
        ["config", "get"], ["config", "set"], ["config", "unset"], ["config", "list"], ["config", "path"],
    ]  # fmt: skip
    for args in commands:
        r = run(*args, "--help")
        assert r.exit_code == 0, (args, r.stderr)
        assert "Usage" in r.stdout, args
