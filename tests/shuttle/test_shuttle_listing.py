"""What people recognise in listings: the description beside the task id, shortened to
fit the terminal, in ``work list``, ``watch`` / ``submit --wait`` and ``fleet``; at
several terminal widths, against a real Weft."""

from __future__ import annotations

import json

import pytest
from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

DESCRIPTION = "Fix the flaky login test\nthat fails on CI about once a week; see issue 12 for the logs"
ONE_LINE = "Fix the flaky login test that fails on CI about once a week; see issue 12 for the logs"


def lines_within(text: str, width: int) -> list[str]:
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    return lines


def submitted(cli: Cli, task_id: str = "login-flake") -> str:
    doc = cli.json("submit", DESCRIPTION, "-c", "code", "--task-id", task_id)
    return str(doc["id"])


@pytest.mark.parametrize("width", [80, 100, 120, 160])
async def test_work_list_shows_the_description_shortened_to_fit(cli: Cli, width: int) -> None:
    work_id = submitted(cli)
    r = cli("work", "list", env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.stderr
    lines = lines_within(r.stdout, width)
    header = next(line for line in lines if "description" in line)
    row = next(line for line in lines if work_id in line)  # the id is never cut
    assert "queued" in row and "Fix the flaky" in row
    assert ONE_LINE not in row and "…" in row  # one line, cut with an ellipsis
    assert "that fails" not in r.stdout.replace(row, "")  # the second line did not wrap below
    if width >= 120:
        assert "login-flake" in row and "task" in header  # the task id beside the description
        assert "Fix the flaky login test that fails" in row  # the description keeps room
    else:
        assert "login-flake" not in row and "task" not in header  # left out before the description


async def test_a_short_description_is_shown_whole(cli: Cli) -> None:
    work_id = str(cli.json("submit", "docs", "-c", "docs", "--task-id", "t-docs")["id"])
    r = cli("work", "list", env={"COLUMNS": "160"})
    row = next(line for line in r.stdout.splitlines() if work_id in line)
    assert " docs " in row and "…" not in row and "t-docs" in row


@pytest.mark.parametrize("width", [60, 120])
async def test_watch_names_the_item_by_its_description(cli: Cli, nc: NatsClient, width: int) -> None:
    work_id = submitted(cli, task_id="T-42")
    agent = Agent(nc, cli.project)
    claimed = await agent.claim()
    await agent.queue.complete(claimed.id, agent.agent_id, {"ok": True})
    r = cli("watch", work_id, env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.stderr
    heading, snapshot = lines_within(r.stdout, width)[:2]
    assert heading.startswith(f"{work_id}  T-42  Fix the")
    assert heading.endswith("…") and "\n" not in heading and "snapshot" in snapshot
    quiet = cli("watch", work_id, "-q")
    assert quiet.exit_code == 0 and quiet.stdout == ""
    as_json = cli("watch", work_id, "--json")  # NDJSON only: no heading
    assert json.loads(as_json.stdout.splitlines()[0])["type"] == "snapshot"


async def test_fleet_shows_recent_work_with_descriptions(cli: Cli, nc: NatsClient) -> None:
    first = submitted(cli, task_id="T-1")
    second = str(cli.json("submit", "write the release notes", "-c", "docs", "--task-id", "T-2")["id"])
    agent = Agent(nc, cli.project)
    claimed = await agent.claim()
    assert claimed.id == first
    doc = cli.json("fleet")
    assert [w["id"] for w in doc["work"]] == [second, first]  # newest first
    assert doc["work"][1]["status"] == "claimed" and doc["work"][1]["assigned_to"] == agent.agent_id
    for width in (80, 160):
        r = cli("fleet", env={"COLUMNS": str(width)})
        assert r.exit_code == 0, r.stderr
        lines = lines_within(r.stdout, width)
        assert any(line.strip().startswith("recent work") for line in lines)
        row = next(line for line in lines if first in line)
        assert "claimed" in row and "Fix the flaky" in row and "…" in row
        assert any(second in line and "write the release notes" in line for line in lines)
        if width == 160:
            assert agent.agent_id[:8] in row and "T-1" in row


def test_fleet_watch_names_the_work_a_spin_up_was_for() -> None:
    from shuttle.output import console, set_no_color
    from shuttle.views import spinup_table

    set_no_color(True)
    work_id = "e" * 32
    event = {
        "kind": "spinup",
        "action": "registered",
        "at": "2026-01-01T00:00:00Z",
        "data": {
            "operation": {
                "target_name": "demo",
                "state": "registered",
                "agent_id": "a" * 32,
                "work_id": work_id,
            }
        },
    }
    with console().capture() as named:
        console().print(spinup_table([event], work=[{"id": work_id, "description": "Count the\nerrors"}]))
    with console().capture() as unknown:
        console().print(spinup_table([event], work=[]))
    assert "Count the errors" in named.get() and work_id[:12] not in named.get()
    assert work_id[:12] in unknown.get()  # not among the recent work: its id, cut short
