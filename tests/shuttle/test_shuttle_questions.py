"""``shuttle questions``, ``shuttle answer``, ``shuttle defer`` and ``shuttle autonomy``
against a real Weft: the operator's side of an agent's question, with the agent side
driven through shared.work.questions."""

from __future__ import annotations

from pathlib import Path

from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

from shared.models import Priority
from shared.work.questions import QuestionBook


async def test_an_operator_lists_and_answers_questions(cli: Cli, nc: NatsClient, project_id: str) -> None:
    agent = Agent(nc, project_id)
    book = QuestionBook(nc, agent.names, agent.queue)
    item = cli.json("submit", "choose the database", "-c", "code")
    await agent.claim()
    asked = await book.ask(
        agent.agent_id,
        "postgres or sqlite?",
        choices=["postgres", "sqlite"],
        work_id=item["id"],
        handle="bot",
    )
    other = await book.ask(agent.agent_id, "lunch?")

    table = cli("questions")
    assert table.exit_code == 0, table.stderr
    assert (
        asked.id in table.stdout
        and "postgres or sqlite?" in table.stdout
        and "postgres | sqlite" in table.stdout
    )
    assert cli("questions", "-q").stdout.split() == [asked.id, other.id]  # both P0: the oldest first
    assert cli("questions", "-q", "--order", "newest").stdout.split() == [other.id, asked.id]
    assert cli("questions", "--work-id", item["id"], "-q").stdout.split() == [asked.id]
    assert cli.json("work", "show", item["id"])["status"] == "waiting-on-operator"

    wrong = cli("answer", asked.id, "oracle")
    assert (
        wrong.exit_code == 1
        and "answer: must be one of the question's choices (postgres, sqlite)" in wrong.stderr
    )
    said = cli("answer", asked.id, "sqlite", "--by", "alice")
    assert said.exit_code == 0 and f"answered {asked.id} (work {item['id']} goes on)" in said.stdout
    assert cli.json("work", "show", item["id"])["status"] == "in-progress"
    answered = cli.json("questions", "--status", "answered")["items"]
    assert [(q["id"], q["answer"], q["answered_by"]) for q in answered] == [(asked.id, "sqlite", "alice")]
    assert cli("questions", "-q").stdout.split() == [other.id]  # open ones by default
    assert cli.json("questions", "--status", "all")["total"] == 2
    twice = cli("answer", asked.id, "postgres")
    assert twice.exit_code == 1 and "was answered already" in twice.stderr
    assert cli.json("answer", other.id, "noodles")["answer"] == "noodles"

    usage = cli("questions", "--status", "maybe")
    assert (
        usage.exit_code == 2
        and "--status: must be one of open, answered, expired, logged, all" in usage.stderr
    )
    missing = cli("answer", "0" * 32, "x")
    assert missing.exit_code == 1 and "no question with this id in this project" in missing.stderr
    assert cli("questions", "--status", "expired").stdout.strip().endswith("no expired questions")


async def test_an_operator_sets_the_policy_and_answers_or_puts_off_several_at_once(
    cli: Cli, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    policy = tmp_path / "autonomy.yaml"
    policy.write_text("modes:\n  P1: async\nrules:\n  - category: security\n    mode: sync\n")
    shown = cli("autonomy", "set", str(policy))
    assert shown.exit_code == 0, shown.stderr
    assert "category=security -> sync" in shown.stdout and "operator" in shown.stdout
    assert cli.json("autonomy", "show")["policy"]["rules"] == [
        {"category": "security", "priority": None, "mode": "sync"}
    ]
    policy.write_text("modes:\n  P1: never\n")
    refused = cli("autonomy", "set", str(policy))
    assert refused.exit_code == 1 and "modes" in refused.stderr and "never" not in refused.stderr
    policy.write_text("- a list\n")
    assert cli("autonomy", "set", str(policy)).exit_code == 2

    agent = Agent(nc, project_id)
    book = QuestionBook(nc, agent.names, agent.queue)
    one = await book.ask(agent.agent_id, "ship?", priority=Priority.P1)
    two = await book.ask(agent.agent_id, "rotate the key?", priority=Priority.P1, category="security")
    three = await book.ask(agent.agent_id, "rename?", priority=Priority.P1)
    listed = cli("questions")
    assert "P1 security sync" in listed.stdout and "P1 async" in listed.stdout
    assert cli("questions", "--priority", "P7").exit_code == 2

    deferred = cli("defer", one.id, "--until", "2h")
    assert deferred.exit_code == 0 and f"put off {one.id} until" in deferred.stdout
    assert cli("questions", "-q").stdout.split() == [two.id, three.id, one.id]  # put off: last
    assert cli("defer", one.id, "--until", "soon").exit_code == 2
    both = cli("answer", two.id, "no", three.id, "yes", one.id, "later", "0" * 32, "x")
    assert both.exit_code == 1  # one refused: the others still count
    assert "3 answered, 0 put off, 1 refused" in both.stdout and "refused 000" in both.stdout
    assert cli("answer", two.id).exit_code == 2  # an id without its answer
    assert {q["id"] for q in cli.json("questions", "--status", "answered")["items"]} == {
        one.id,
        two.id,
        three.id,
    }
    assert cli("autonomy", "unset").exit_code == 0
    assert cli.json("autonomy", "show")["stored"] is False


async def test_a_waiting_item_shows_its_question_whole_and_the_line_that_answers_it(
    cli: Cli, nc: NatsClient, project_id: str
) -> None:
    agent = Agent(nc, project_id)
    book = QuestionBook(nc, agent.names, agent.queue)
    item = cli.json("submit", "choose the database", "-c", "code")
    await agent.claim()
    long = "Which database should the billing service use, given ~40 writes/s, a single node and " + (
        "a team that knows postgres well but wants zero operations work for the first year?"
    )
    asked = await book.ask(
        agent.agent_id, long, choices=["postgres", "sqlite"], work_id=item["id"], handle="bot"
    )
    flat = lambda text: "".join(text.split())  # noqa: E731  (the terminal folds long lines)

    watched = cli("watch", item["id"][:10], "--timeout", "1")
    assert watched.exit_code == 1, watched.stderr
    assert flat(long) in flat(watched.stdout) and "choices: postgres | sqlite" in watched.stdout
    assert f"answer with:  shuttle answer {asked.id} postgres" in watched.stdout

    shown = cli("questions", "show", asked.id)
    assert shown.exit_code == 0, shown.stderr
    assert flat(long) in flat(shown.stdout) and "bot" in shown.stdout and item["id"] in shown.stdout
    assert (
        f"shuttle answer {asked.id} postgres" in shown.stdout
        and "(or any of: postgres | sqlite)" in shown.stdout
    )
    listed = cli("questions")
    assert "shuttle questions show ID" in listed.stdout

    assert cli("answer", asked.id, "sqlite", "--by", "dana").exit_code == 0
    after = cli("questions", "show", asked.id)
    assert "answered by" in after.stdout and "dana" in after.stdout and "answer with" not in after.stdout
    table = cli("questions", "--status", "answered")
    assert "sqlite" in table.stdout and "dana" in table.stdout
    # the item's history names the same answerer the agent was told (not "loom")
    events = cli.json("work", "trace", item["id"])["events"]
    assert [e["author"] for e in events if e["kind"] == "answer"] == ["dana"]

    missing = cli("questions", "show", "0" * 32)
    assert missing.exit_code == 1 and "no question with this id in this project" in missing.stderr
