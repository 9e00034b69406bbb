"""``shuttle questions`` and ``shuttle answer`` against a real Weft: the operator's side of
an agent's question, with the agent side driven through shared.work.questions."""

from __future__ import annotations

from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

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
    assert cli("questions", "-q").stdout.split() == [other.id, asked.id]  # newest first
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
    assert usage.exit_code == 2 and "--status: must be one of open, answered, expired, all" in usage.stderr
    missing = cli("answer", "0" * 32, "x")
    assert missing.exit_code == 1 and "no question with this id in this project" in missing.stderr
    assert cli("questions", "--status", "expired").stdout.strip().endswith("no expired questions")
