"""``shuttle usage`` and ``shuttle budget show|set`` (and the hold in ``shuttle fleet``),
against a real Weft on a real nats-server."""

from __future__ import annotations

import asyncio

from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

from shared.usage.rules import Usage

SECRET = "sk-live-Zx81Qa9"


async def test_usage_by_agent_and_budgets_set_show_and_hold(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    await agent.register()
    submitted = await asyncio.to_thread(cli.json, "submit", "write it", "-c", "code")
    item = await agent.claim()
    assert item.id == submitted["id"]
    await agent.queue.complete(
        item.id, agent.agent_id, "ok", usage=Usage(input_tokens=40, cost=1.5, model="m1")
    )

    by_agent = await asyncio.to_thread(cli.json, "usage", "--by", "agent")
    assert [(r["key"], r["cost"], r["input_tokens"]) for r in by_agent["rows"]] == [(agent.agent_id, 1.5, 40)]
    table = await asyncio.to_thread(cli, "usage", "--by", "model")
    assert table.exit_code == 0 and "m1" in table.stdout and "usage by model" in table.stdout

    held = await asyncio.to_thread(cli.json, "budget", "set", "--cost", "1.5")
    assert held["project_daily"]["cost"] == 1.5 and "reached its daily budget" in held["hold"]
    fleet = await asyncio.to_thread(cli, "fleet")
    assert fleet.exit_code == 0 and "On hold: budget: the project reached its daily budget" in fleet.stdout
    shown = await asyncio.to_thread(cli, "budget", "show")
    assert shown.exit_code == 0 and "cost 1.5" in shown.stdout and "reached its daily budget" in shown.stdout

    raised = await asyncio.to_thread(cli.json, "budget", "set", "--cost", "10", "--tokens", "5000")
    assert raised["hold"] is None and raised["project_daily"] == {"cost": 10.0, "tokens": 5000}
    assert "On hold" not in (await asyncio.to_thread(cli, "fleet")).stdout
    cleared = await asyncio.to_thread(cli.json, "budget", "set", "--clear")
    assert cleared["project_daily"] is None

    other = await asyncio.to_thread(cli.json, "submit", "next", "-c", "code")
    item_budget = await asyncio.to_thread(cli.json, "budget", "set", "--work", other["id"], "--tokens", "99")
    assert item_budget["budget"] == {"cost": None, "tokens": 99}


def test_budget_and_usage_flags_are_checked_without_echo(cli: Cli) -> None:
    for args, says in (
        (("usage", "--by", SECRET), "--by: must be one of"),
        (("budget", "set"), "--cost or --tokens is required"),
        (("budget", "set", "--clear", "--cost", "1"), "--clear: cannot be combined"),
        (("budget", "set", "--cost", "1", "--target", "x", "--work", "y"), "give at most one"),
    ):
        result = cli(*args)
        assert result.exit_code == 2 and says in result.stderr and SECRET not in result.stderr
    refused = cli("budget", "set", "--cost", "-1")
    assert refused.exit_code != 0 and "cost" in refused.stderr
    unknown = cli("budget", "set", "--tokens", "5", "--target", "nowhere")
    assert unknown.exit_code != 0 and "target" in unknown.stderr
    bad_day = cli("usage", "--since", SECRET)
    assert bad_day.exit_code != 0 and "since" in bad_day.stderr and SECRET not in bad_day.stderr
