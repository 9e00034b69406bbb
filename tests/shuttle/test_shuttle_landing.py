"""``shuttle landing`` and ``shuttle repo set``'s landing options against a real Weft: the
gate as arguments, the queue with each item's latest try, who lands now (docs/landing.md)."""

from __future__ import annotations

from pathlib import Path

from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

from shared.git.landlock import LandingLocks
from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.work import hand_in, work_queue

WORKER = "a" * 32
LANDER = "d" * 32


async def test_the_gate_is_set_as_arguments_and_the_queue_shows_each_items_latest_try(
    cli: Cli, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    none = cli("landing")
    assert none.exit_code != 0 and "repository" in none.stderr
    origin = make_origin(tmp_path)
    stored = cli.json(
        "repo", "set", str(origin), "--gate", "make", "--gate", "test", "--batch", "8", "--mode", "rebase",
        "--land-failures", "2", "--keep-landed-branches", "--veto",
    )  # fmt: skip
    repo = stored["repository"]
    keys = ("gate", "land_batch", "land_mode", "land_failures", "delete_landed", "veto")
    assert [repo[k] for k in keys] == [["make", "test"], 8, "rebase", 2, False, True]
    shown = cli("repo", "show")
    assert shown.exit_code == 0 and "make test" in shown.stdout and "rebase" in shown.stdout
    assert "veto" in shown.stdout
    bad = cli("repo", "set", str(origin), "--mode", "squash")
    assert bad.exit_code != 0 and "--mode" in bad.stderr and "squash" not in bad.stderr
    forged = cli.json("repo", "set", str(origin), "--forge", "github", "--github-repository", "acme/app")
    assert (forged["repository"]["forge"], forged["repository"]["github_repository"]) == (
        "github",
        "acme/app",
    )
    half = cli("repo", "set", str(origin), "--forge", "github")
    assert half.exit_code != 0 and "github_repository" in half.stderr
    assert cli("repo", "set", str(origin), "--forge", "gitlab").exit_code != 0
    cli.json("repo", "set", str(origin))  # back to landing by push

    q = work_queue(nc, ProjectNames(project_id))
    worker = Claimant(agent_id=WORKER, agent_type="generic", capabilities=("code",))
    lander = Claimant(agent_id=LANDER, agent_type="lander", capabilities=("land",))
    for task in ("fix-login", "add-logout"):
        item = await q.submit(WorkSubmission(task_id=task, description=f"do {task}", capability="code"))
        assert (await q.claim(worker)) is not None
        await hand_in(q, item.id, WORKER, f"loom/{task}", base_sha="1" * 40, head_sha="2" * 40)
    first = await q.claim(lander)
    assert first is not None
    deferred = "conflicts in src/login.py with an item ahead of it in the same batch"
    await q.release_landing(first.id, LANDER, deferred, deferred=True)
    assert await LandingLocks(nc.jetstream(), ProjectNames(project_id)).acquire("main", LANDER) is not None

    table = cli("landing")
    assert table.exit_code == 0, table.stderr
    out = table.stdout
    assert f"landing on main now: lander {LANDER}" in out
    assert all(s in out for s in ("fix-login", "add-logout", "loom/fix-login", "deferred"))
    listed = cli.json("landing")
    assert [e["task_id"] for e in listed["queue"]] == ["fix-login", "add-logout"]
    assert listed["queue"][0]["last_attempt"]["outcome"] == "deferred"

    # the coordinator's veto: one waits on the operator's "land this?"
    asking = await q.claim(lander)
    assert asking is not None
    question = await QuestionBook(nc, ProjectNames(project_id), q).ask_to_land(
        LANDER, asking.id, "Land this?"
    )
    asks = cli("landing")
    assert (
        asks.exit_code == 0 and f"asks the operator, land this? (question {question.id[:12]})" in asks.stdout
    )

    vetoed = cli.json("submit", "do it", "-c", "code", "--no-veto")
    assert vetoed["veto"] is False
    assert cli.json("submit", "do it", "-c", "code")["veto"] is None  # as the repository says
