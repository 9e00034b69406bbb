"""Shuttle takes what its tables show: an id's start, a task id, an agent's handle (resolved by
Weft's ``/resolve`` routes, shared.refs), against a real Weft on a real nats-server."""

from __future__ import annotations

import json

from agent_side import Agent, until
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

from shared.leases.book import LeaseBook


def submit(cli: Cli, task_id: str) -> str:
    item = cli.json("submit", f"work {task_id}", "-c", "code", "--task-id", task_id)
    return str(item["id"])


async def test_work_commands_take_a_task_id_or_the_start_of_an_id(cli: Cli) -> None:
    first, second = submit(cli, "fix-login"), submit(cli, "write-docs")
    assert cli.json("work", "show", "fix-login")["id"] == first
    assert cli.json("work", "show", first[:8])["id"] == first
    assert cli.json("work", "graph", "write-docs")["root"] == second
    assert cli.json("work", "trace", second[:12])["work_id"] == second
    assert cli.json("work", "checkpoints", "fix-login")["work_id"] == first
    with cli.weft.api(cli.project) as api:
        resolved = api.get("/api/work/resolve", params={"ref": "fix-login"}).json()
    assert resolved == {"id": first, "matched": "name"}

    cancelled = cli("work", "cancel", "fix-login", "-q")
    assert cancelled.exit_code == 0 and cancelled.stdout.split() == [first]
    assert cli.json("work", "show", first)["status"] == "cancelled"
    both = cli("work", "cancel", second[:6], first, "--json")  # the batch route, with full ids
    assert both.exit_code == 1 and "1 of 2 refused" in both.stderr
    outcome = {r["id"]: r["ok"] for r in json.loads(both.stdout)["results"]}
    assert outcome == {second: True, first: False}


async def test_a_reference_that_names_nothing_or_several_is_refused_by_name(cli: Cli) -> None:
    ids = [submit(cli, "same-0")]
    missing = cli("work", "show", "s3cr3t-T0KEN")
    assert missing.exit_code == 1 and missing.stderr.startswith(
        "shuttle: error: work_id: no work item matches"
    )
    assert "s3cr3t" not in missing.stderr + missing.stdout
    short = cli("work", "show", ids[0][:3])
    assert short.exit_code == 1 and "at least 4" in short.stderr
    dup = submit(cli, "same-0")  # a task id two items carry
    twice = cli("watch", "same-0", "--timeout", "1")
    assert twice.exit_code == 1 and "work_id: names 2 work items" in twice.stderr
    assert ids[0] in twice.stderr and dup in twice.stderr and "same-0" not in twice.stderr


async def test_agents_and_leases_take_a_handle(cli: Cli, nc: NatsClient) -> None:
    alice, bob = "a1" * 16, "b2" * 16
    for agent_id, handle in ((alice, "alice"), (bob, "bob")):
        await Agent(nc, cli.project, agent_id).register(handle=handle)
    await until(lambda: len(cli.json("agents", "list")["items"]) == 2, what="Weft to see both agents")
    assert cli.json("agents", "show", "bob")["agent_id"] == bob
    assert cli.json("agents", "show", alice[:6])["agent_id"] == alice
    book = LeaseBook(nc, Agent(nc, cli.project).names)
    try:
        held = await book.acquire(bob, ["docs/*.md"], handle="bob")
        await book.acquire(alice, ["src/**"], handle="alice")
        assert cli("leases", "-q", "--holder", "bob").stdout.split() == [held.id]
    finally:
        await book.stop()
    twin = "c3" * 16
    await Agent(nc, cli.project, twin).register(handle="bob")  # two agents named bob
    await until(lambda: len(cli.json("agents", "list")["items"]) == 3, what="Weft to see the third")
    refused = cli("leases", "--holder", "bob")
    assert refused.exit_code == 1 and refused.stderr.startswith("shuttle: error: holder: names 2 agents")
    assert bob in refused.stderr and twin in refused.stderr
