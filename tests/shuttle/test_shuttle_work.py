"""``submit``, ``watch``, ``work`` and ``dlq`` against a real Weft on a real
nats-server, with the agent side driven through shared.work."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

from agent_side import Agent, until
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli


def submit(cli: Cli, *extra: str) -> dict[str, object]:
    doc = cli.json("submit", "fix the flaky test", "-c", "code", *extra)
    assert isinstance(doc, dict)
    return doc


def weft_item(cli: Cli, work_id: str) -> dict[str, object]:
    with cli.weft.api(cli.project) as api:
        response = api.get(f"/api/work/{work_id}")
        assert response.status_code == 200
        return dict(response.json())


async def test_submit_with_flags_is_what_weft_stores(cli: Cli) -> None:
    item = submit(
        cli,
        "--priority", "8", "--boundary", "corporate", "--task-id", "T-1", "--required-type", "claude-code",
        "--context", '{"repo": "acme/app"}', "--deadline", "2h", "--max-attempts", "2", "--scope", "team",
    )  # fmt: skip
    stored = weft_item(cli, str(item["id"]))
    routing = {"waiting_reason", "updated_at"}  # routing annotates the record right after submit
    assert {k: v for k, v in stored.items() if k not in routing} == {
        k: v for k, v in item.items() if k not in routing
    }
    assert stored["status"] == "queued" and stored["priority"] == 8 and stored["boundary"] == "corporate"
    assert stored["task_id"] == "T-1" and stored["context"] == {"repo": "acme/app"}
    assert stored["required_agent_type"] == "claude-code" and stored["max_attempts"] == 2
    assert stored["deadline"] is not None and stored["project_id"] == cli.project


async def test_submit_quiet_prints_only_the_id(cli: Cli) -> None:
    r = cli("submit", "x", "-c", "code", "-q")
    assert r.exit_code == 0
    work_id = r.stdout.strip()
    assert len(work_id) == 32 and weft_item(cli, work_id)["description"] == "x"


async def test_submit_batch_file_yaml_and_json(cli: Cli, tmp_path: Path) -> None:
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "- {description: one, capability: code, task_id: b-1}\n"
        "- {description: two, capability: test, priority: 9, context: {pr: 7}}\n"
    )
    doc = cli.json("submit", "--file", str(batch))
    assert [i["task_id"] for i in doc["items"]] == ["b-1", doc["items"][1]["task_id"]]
    for item in doc["items"]:
        assert weft_item(cli, item["id"])["status"] == "queued"
    with cli.weft.api(cli.project) as api:
        listed = api.get("/api/work", params={"capability": "test"}).json()["items"]
    assert [i["id"] for i in listed] == [doc["items"][1]["id"]] and listed[0]["context"] == {"pr": 7}
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"description": "three", "capability": "code"}))
    r = cli("submit", "--file", str(single))
    assert r.exit_code == 0 and "submitted" in r.stdout


async def test_submit_interactive_reprompts_until_valid(cli: Cli) -> None:
    answers = "\n".join(
        [
            "",  # description: required -> asked again
            "write the docs",
            "Not Valid",  # capability: refused -> asked again
            "docs",
            "",  # boundary: default
            "11",  # priority out of range
            "7",
            "",  # required type: none
            "yesterday",  # deadline: refused
            "",  # deadline: none
            "[1]",  # context: refused
            '{"a": 1}',
            "",  # task id: generated default
        ]
    )
    r = cli.proc("submit", "-i", "--json", input=answers + "\n")  # CliRunner would echo input to stdout
    assert r.exit_code == 0, r.stderr
    item = json.loads(r.stdout)  # prompts go to stderr: stdout is the document alone
    stored = weft_item(cli, item["id"])
    assert stored["description"] == "write the docs" and stored["capability"] == "docs"
    assert stored["priority"] == 7 and stored["context"] == {"a": 1}
    assert "description: is required" in r.stderr and "capability: must be lowercase" in r.stderr
    assert "priority: must be an integer" in r.stderr and "deadline: must be an ISO time" in r.stderr
    assert "Not Valid" not in r.stderr and "yesterday" not in r.stderr


async def test_submit_refused_by_weft_is_exit_1_with_its_message(cli: Cli) -> None:
    r = cli("submit", "x" * 32_001, "-c", "code")
    assert r.exit_code == 2  # caught before sending
    r = cli("submit", "x", "-c", "code", "--deadline", "2000-01-01T00:00:00Z")
    with cli.weft.api(cli.project) as api:
        direct = api.post("/api/work", json={"task_id": "t", "description": "x", "capability": "code",
                                             "deadline": "2000-01-01T00:00:00Z"})  # fmt: skip
    if direct.status_code >= 400:
        assert r.exit_code == 1 and direct.json()["message"] in r.stderr
    else:
        assert r.exit_code == 0


async def started(proc: subprocess.Popen[str]) -> str:
    """The snapshot line a watching process prints (after the line naming the item, unless
    --json): from then on it follows events."""
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
    if re.match(r"[0-9a-f]{32}  ", line):  # the heading: id, task id, description
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
    assert line, proc.stderr.read() if proc.stderr else ""
    return line


async def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
    return proc.returncode, stdout, stderr


async def test_watch_follows_an_item_to_completed_as_an_agent_works_it(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    work_id = str(submit(cli)["id"])
    proc = cli.popen("watch", work_id)
    first = await started(proc)
    assert "snapshot" in first and "queued" in first
    claimed = await agent.claim()
    assert claimed.id == work_id
    await agent.queue.progress(work_id, agent.agent_id, 40, "halfway there")
    await agent.queue.complete(work_id, agent.agent_id, {"pr": 42})
    code, stdout, stderr = await finish(proc)
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert any("work.claimed" in line and agent.agent_id in line for line in lines)
    assert any("work.progress" in line and "40% halfway there" in line for line in lines)
    assert "work.completed" in lines[-1] and '{"pr": 42}' in lines[-1]
    assert weft_item(cli, work_id)["status"] == "completed"


async def test_watch_of_a_failed_item_exits_1(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    work_id = str(submit(cli, "--max-attempts", "1")["id"])
    proc = cli.popen("watch", work_id, "--json")
    first = json.loads(await started(proc))
    assert first["type"] == "snapshot" and first["status"] == "queued" and first["item"]["id"] == work_id
    await agent.claim()
    await agent.queue.fail(work_id, agent.agent_id, "tests are red")
    code, stdout, stderr = await finish(proc)
    assert code == 1
    assert stderr == f"shuttle: error: work {work_id} ended dead-lettered: tests are red\n"
    events = [json.loads(line) for line in stdout.splitlines()]
    types = [e["type"] for e in events]
    assert "work.claimed" in types and "work.failed" in types and types[-1] == "work.dead-lettered"
    assert events[-1]["status"] == "dead-lettered" and weft_item(cli, work_id)["status"] == "dead-lettered"


async def test_watch_in_process_exit_code_follows_the_outcome(cli: Cli, nc: NatsClient) -> None:
    """Through CliRunner: whatever moment watch joins, completed is 0 and dead-lettered is 1."""
    agent = Agent(nc, cli.project)
    good, bad = str(submit(cli)["id"]), str(submit(cli, "--max-attempts", "1")["id"])
    watches = asyncio.create_task(
        asyncio.to_thread(
            lambda: (cli("watch", good, "--timeout", "30"), cli("watch", bad, "--timeout", "30"))
        )
    )
    for _ in range(2):
        item = await agent.claim()
        if item.id == good:
            await agent.queue.complete(good, agent.agent_id, "done")
        else:
            await agent.queue.fail(bad, agent.agent_id, "nope")
    good_r, bad_r = await asyncio.wait_for(watches, 90)
    assert good_r.exit_code == 0 and "completed" in good_r.stdout
    assert bad_r.exit_code == 1 and bad_r.stderr == f"shuttle: error: work {bad} ended dead-lettered: nope\n"


async def test_watch_retries_then_completes(cli: Cli, nc: NatsClient) -> None:
    """A failure with attempts left is not the end: watch keeps going until completed."""
    agent = Agent(nc, cli.project)
    work_id = str(submit(cli)["id"])
    proc = cli.popen("watch", work_id)
    await started(proc)
    await agent.claim()
    await agent.queue.fail(work_id, agent.agent_id, "flaky")
    await agent.claim()
    await agent.queue.complete(work_id, agent.agent_id, "ok")
    code, stdout, stderr = await finish(proc)
    assert code == 0, stderr
    assert "work.failed" in stdout and "flaky" in stdout and "work.completed" in stdout


async def test_watch_of_an_already_final_item_and_timeout(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    work_id = str(submit(cli)["id"])
    r = cli("watch", work_id, "--timeout", "0.5")
    assert r.exit_code == 1
    assert r.stderr == f"shuttle: error: work {work_id} is still queued after 0.5s (stopped watching)\n"
    await agent.claim()
    await agent.queue.complete(work_id, agent.agent_id, None)
    r = cli("watch", work_id)
    assert r.exit_code == 0 and "completed" in r.stdout
    r = cli("watch", "f" * 32)
    assert r.exit_code == 1 and "no work item" in r.stderr


async def test_submit_wait_as_a_process(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    proc = cli.popen("submit", "ship it", "-c", "code", "--wait", "--json")
    claimed = await agent.claim(timeout=30)
    await agent.queue.complete(claimed.id, agent.agent_id, {"merged": True})
    stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 0, stderr
    final = json.loads(stdout)
    assert (
        final["id"] == claimed.id and final["status"] == "completed" and final["result"] == {"merged": True}
    )


async def test_submit_wait_fails_with_exit_1(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    proc = cli.popen("submit", "doomed", "-c", "code", "--max-attempts", "1", "--wait")
    claimed = await agent.claim(timeout=30)
    await agent.queue.fail(claimed.id, agent.agent_id, "no way")
    stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 1
    assert stderr.strip() == f"shuttle: error: work {claimed.id} ended dead-lettered: no way"
    assert f"submitted {claimed.id}" in stdout


async def test_watch_as_a_process_ends_on_cancel(cli: Cli) -> None:
    work_id = str(submit(cli)["id"])
    proc = cli.popen("watch", work_id)
    await started(proc)
    r = cli("work", "cancel", work_id, "--reason", "not needed")
    assert r.exit_code == 0 and "cancelled" in r.stdout
    code, stdout, stderr = await finish(proc)
    assert code == 1
    assert stderr == f"shuttle: error: work {work_id} ended cancelled: cancelled by weft-api: not needed\n"
    assert "work.cancelled" in stdout and "reason: not needed" in stdout


async def test_work_list_show_filters_and_paging(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    ids = [str(submit(cli, "--task-id", f"p-{n}")["id"]) for n in range(3)]
    other = str(cli.json("submit", "docs", "-c", "docs")["id"])
    claimed = await agent.claim()
    listed = cli.json("work", "list")
    with cli.weft.api(cli.project) as api:
        direct = api.get("/api/work").json()
    assert [i["id"] for i in listed["items"]] == [i["id"] for i in direct["items"]]
    assert {i["id"] for i in listed["items"]} == {*ids, other}
    assert [i["id"] for i in cli.json("work", "list", "-c", "docs")["items"]] == [other]
    assert [i["id"] for i in cli.json("work", "list", "--status", "claimed")["items"]] == [claimed.id]
    assert [i["id"] for i in cli.json("work", "list", "--assigned-to", agent.agent_id)["items"]] == [
        claimed.id
    ]
    page = cli.json("work", "list", "--limit", "2")
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = cli.json("work", "list", "--limit", "2", "--cursor", page["next_cursor"])
    assert len(rest["items"]) == 2 and not rest["next_cursor"]
    everything = cli.json("work", "list", "--limit", "1", "--all")
    assert [i["id"] for i in everything["items"]] == [i["id"] for i in page["items"] + rest["items"]]
    r = cli("work", "list", "--limit", "2")
    assert r.exit_code == 0 and "more: --cursor" in r.stdout and page["items"][0]["id"] in r.stdout
    r = cli("work", "list", "-q")
    assert sorted(r.stdout.split()) == sorted([*ids, other])
    shown = cli.json("work", "show", claimed.id)
    assert shown == weft_item(cli, claimed.id)
    r = cli("work", "show", claimed.id)
    assert r.exit_code == 0 and claimed.id in r.stdout and "claimed" in r.stdout
    # in sections a person reads in order (what, status, who, when), empty fields left out
    sections = {"what", "status", "who", "when", "result", "graph", "more"}
    firsts = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.strip()]
    assert list(dict.fromkeys(w for w in firsts if w in sections))[:4] == ["what", "status", "who", "when"]
    assert "description" in r.stdout and "assigned_to" in r.stdout and "finished_at" not in r.stdout
    assert len(r.stdout.splitlines()) < 25
    r = cli("work", "list", "--cursor", "garbage")
    assert r.exit_code == 1 and "cursor" in r.stderr


async def test_work_cancel_batch_and_retry(cli: Cli, nc: NatsClient) -> None:
    a, b = (str(submit(cli)["id"]) for _ in range(2))
    doc = cli.json("work", "cancel", a, b)
    assert doc["succeeded"] == 2 and doc["failed"] == 0
    assert {weft_item(cli, a)["status"], weft_item(cli, b)["status"]} == {"cancelled"}
    r = cli("work", "cancel", a, "f" * 32)  # one already final, one unknown
    assert r.exit_code == 1 and "2 of 2 refused" in r.stderr
    r = cli("work", "cancel", a)
    assert r.exit_code == 1 and r.stderr.startswith("shuttle: error: ") and r.stderr.count("\n") == 1
    r = cli("work", "retry", a)
    assert r.exit_code == 1
    assert (
        r.stderr
        == f"shuttle: error: work_id: {a} is cancelled; only failed or dead-lettered work can be retried\n"
    )
    agent = Agent(nc, cli.project)
    dead = str(submit(cli, "--max-attempts", "1")["id"])
    await agent.claim()
    await agent.queue.fail(dead, agent.agent_id, "boom")
    r = cli("work", "retry", dead, "-q")
    assert r.exit_code == 0 and r.stdout == f"{dead}\n"
    assert weft_item(cli, dead)["status"] == "queued"
    r = cli("work", "show", "not-an-id")
    assert r.exit_code == 1 and r.stderr.startswith("shuttle: error: ")


async def test_dlq_list_retry_discard(cli: Cli, nc: NatsClient) -> None:
    agent = Agent(nc, cli.project)
    dead = []
    for n in range(2):
        work_id = str(submit(cli, "--max-attempts", "1", "--task-id", f"d-{n}")["id"])
        await agent.claim()
        await agent.queue.fail(work_id, agent.agent_id, f"broken {n}")
        dead.append(work_id)
    listed = cli.json("dlq", "list")
    with cli.weft.api(cli.project) as api:
        direct = api.get("/api/dlq").json()
    assert listed["items"] == direct["items"]
    assert [e["item"]["id"] for e in listed["items"]] == dead
    r = cli("dlq", "list")
    assert r.exit_code == 0 and dead[0] in r.stdout and "broken 0" in r.stdout
    # each dead letter is put to a person (docs/operator.md, Escalation): shown with the item
    for _ in range(200):
        escalation = weft_item(cli, dead[0]).get("escalation")
        if escalation:
            break
        await asyncio.sleep(0.05)
    assert escalation, "the sweep did not escalate the dead letter"
    r = cli("work", "show", dead[0])
    assert r.exit_code == 0 and "P1 waiting for an answer to question" in r.stdout
    # the attempt's line (its duration too once its claim's span has been published: the
    # report does not wait for spans, so under load the line may come without it)
    assert "attempt 1" in r.stdout and "broken 0" in r.stdout
    retried = cli.json("dlq", "retry", dead[0])
    assert retried["status"] == "queued" and weft_item(cli, dead[0])["status"] == "queued"
    r = cli("dlq", "discard", dead[1])
    assert r.exit_code == 0 and f"discarded {dead[1]}" in r.stdout
    assert cli.json("dlq", "list")["items"] == []
    r = cli("dlq", "retry", dead[1])
    assert r.exit_code == 1


async def test_submit_batch_wait_follows_every_item(cli: Cli, nc: NatsClient, tmp_path: Path) -> None:
    agent = Agent(nc, cli.project)
    batch = tmp_path / "two.json"
    batch.write_text(json.dumps({"items": [{"description": "a", "capability": "code"}] * 2}))
    proc = cli.popen("submit", "--file", str(batch), "--wait", "--json")
    for _ in range(2):
        claimed = await agent.claim(timeout=30)
        await agent.queue.complete(claimed.id, agent.agent_id, claimed.id)
    stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 0, stderr
    finals = json.loads(stdout)["items"]
    assert [i["status"] for i in finals] == ["completed", "completed"]
    assert [i["result"] for i in finals] == [i["id"] for i in finals]


async def test_watch_says_why_no_agent_has_taken_the_item(cli: Cli) -> None:
    """Weft's routing knows why an item waits; following it must say so, not just "queued"."""
    item = submit(cli)

    def reason() -> object:
        return weft_item(cli, str(item["id"])).get("waiting_reason")

    why = await until(reason, what="routing to record why the item waits")
    watched = cli("watch", str(item["id"]), "--timeout", "0.5")
    assert watched.exit_code == 1
    lines = watched.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if "snapshot" in line)
    assert "queued" in lines[at] and lines[at + 1].strip() == str(why)
