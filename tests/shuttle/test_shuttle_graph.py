"""Plans and dependencies from the command line: ``submit --after``, ``submit --file plan.yaml``
(local names, one request, all or nothing), ``work graph`` (the tree with states) and the
bottleneck ``work list`` names."""

from __future__ import annotations

from pathlib import Path

from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

PLAN = """\
- name: migration
  description: write the migration
  capability: code
- name: api
  description: the API on top of it
  capability: code
  after: [migration]
- name: docs
  description: document the API
  capability: code
  after: [api]
- description: tests of the API
  capability: code
  after: [api]
"""


async def test_a_plan_file_is_submitted_whole_and_runs_in_order(
    cli: Cli, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    doc = cli.json("submit", "--file", str(plan))
    ids = [i["id"] for i in doc["items"]]
    assert [i["status"] for i in doc["items"]] == ["queued", "blocked", "blocked", "blocked"]
    assert doc["names"] == {"migration": ids[0], "api": ids[1], "docs": ids[2]}
    assert doc["items"][2]["depends_on"] == [ids[1]]
    listed = cli("work", "list")  # three open items wait on the migration: a bottleneck
    assert f"bottleneck: {ids[0]}" in listed.stdout and "holds up 3 open items" in listed.stdout

    tree = cli("work", "graph", ids[1])
    assert tree.exit_code == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert ids[1] in lines[0] and "blocked" in lines[0]
    assert any("needs" in line for line in lines) and any("unblocks" in line for line in lines)
    needs_at = next(n for n, line in enumerate(lines) if "needs" in line)
    assert ids[0] in lines[needs_at + 1] and "queued" in lines[needs_at + 1]
    said = [line.strip(" │└├─") for line in lines]  # each item says what it is, under its ids
    assert said[1] == "the API on top of it" and said[needs_at + 2] == "write the migration"
    assert "document the API" in said and "tests of the API" in said
    assert all(any(i in line for line in lines) for i in ids)
    graph = cli.json("work", "graph", ids[1])
    assert {n["id"] for n in graph["nodes"]} == set(ids)
    watched = cli("watch", ids[1], "--timeout", "0.3")  # a blocked item says what it waits for
    assert watched.exit_code == 1 and "blocked  waits for 1 item(s) to complete first" in watched.stdout

    agent = Agent(nc, project_id)
    order = []
    for _ in range(4):
        item = await agent.claim()
        order.append(item.id)
        await agent.queue.complete(item.id, agent.agent_id)
    assert order[:2] == ids[:2] and set(order[2:]) == set(ids[2:])
    done = cli("work", "graph", ids[0])
    assert done.exit_code == 0 and done.stdout.count("completed") == 4
    assert "bottleneck:" not in cli("work", "list").stdout


async def test_submit_after_blocks_on_existing_work(cli: Cli, nc: NatsClient, project_id: str) -> None:
    first = cli.json("submit", "first", "-c", "code")
    second = cli.json("submit", "second", "-c", "code", "--after", first["id"])
    assert (second["status"], second["depends_on"]) == ("blocked", [first["id"]])
    shown = cli("work", "list", "--status", "blocked", "-q")
    assert shown.stdout.split() == [second["id"]]
    agent = Agent(nc, project_id)
    claimed = await agent.claim()
    assert claimed.id == first["id"]
    await agent.queue.complete(claimed.id, agent.agent_id)
    assert (await agent.claim()).id == second["id"]


async def test_bad_plans_and_after_are_refused_before_anything_is_created(cli: Cli, tmp_path: Path) -> None:
    secret = "f" * 32
    r = cli("submit", "late", "-c", "code", "--after", "not-an-id")
    assert r.exit_code == 2 and "--after.0: must be exactly 32 lowercase hex" in r.stderr
    assert "not-an-id" not in r.stderr
    r = cli("submit", "late", "-c", "code", "--after", secret)
    assert r.exit_code == 1 and "depends_on.0: no work item with this id in this project" in r.stderr
    assert secret not in r.stderr
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text(
        "- {name: a, description: a, capability: code, after: [b]}\n"
        "- {name: b, description: b, capability: code, after: [a]}\n"
    )
    r = cli("submit", "--file", str(cycle))
    assert r.exit_code == 1
    assert "the plan has a cycle (items.0 -> items.1 -> items.0)" in r.stderr
    assert "nothing was submitted" in r.stderr
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("- {name: a, description: a, capability: code, after: [nope]}\n")
    r = cli("submit", "--file", str(unknown))
    assert r.exit_code == 1 and "items.0.after.0: names no item of this plan" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: Bad Name, description: a, capability: code}\n")
    r = cli("submit", "--file", str(bad))
    assert r.exit_code == 2 and "item 1: name: must be" in r.stderr and "Bad Name" not in r.stderr
    r = cli("submit", "--file", str(bad), "--after", secret)
    assert r.exit_code == 2 and "--after, --review and --veto are for one submission" in r.stderr
    assert cli.json("work", "list")["total"] == 0
    missing = cli("work", "graph", secret)
    assert missing.exit_code == 1 and secret not in missing.stderr


async def test_submit_with_review_and_a_reviewed_plan_entry(
    cli: Cli, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    item = cli.json("submit", "parser", "-c", "code", "--review", "review", "--review-rounds", "2")
    assert item["review"] == {"capability": "review", "rounds": 2} and item["review_round"] == 0
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "- {name: a, description: a, capability: code, review: {capability: review}}\n"
        "- {name: b, description: b, capability: code, after: [a]}\n"
    )
    doc = cli.json("submit", "--file", str(plan))
    assert doc["items"][0]["review"] == {"capability": "review", "rounds": 1}

    worker, reviewer = Agent(nc, project_id), Agent(nc, project_id, "b" * 32, caps=("review",))
    claimed = await worker.claim()
    assert claimed.id == item["id"]
    await worker.queue.complete(item["id"], worker.agent_id, {"pr": 3})
    assert cli.json("work", "show", item["id"])["status"] == "in-review"
    shown = cli("work", "list", "--status", "in-review", "-q")
    assert shown.stdout.split() == [item["id"]]
    review = await reviewer.claim()
    assert review.id == item["id"] and review.status.value == "reviewing"
    await reviewer.queue.review(item["id"], reviewer.agent_id, "approve", "ok")
    done = cli.json("work", "show", item["id"])
    assert done["status"] == "completed" and done["reviews"][0]["verdict"] == "approve"

    for args, message in (
        (("--review", "Bad"), "review.capability: must be"),
        (("--review-rounds", "2"), "--review-rounds needs --review"),
        (("--review", "review", "--review-rounds", "11"), "--review-rounds"),
    ):
        r = cli("submit", "x", "-c", "code", *args)
        assert r.exit_code == 2 and message in r.stderr, (args, r.stderr)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {description: a, capability: code, review: {capability: review, colour: red}}\n")
    r = cli("submit", "--file", str(bad))
    assert r.exit_code == 2 and "item 1: review.colour: unknown field" in r.stderr
    too_many = cli(
        "submit", "x", "-c", "code", "--review", "review", "--review-rounds", "5", "--max-attempts", "2"
    )
    assert too_many.exit_code == 1 and "review: rounds must not exceed max_attempts" in too_many.stderr
