"""The lander (warp/lander.py) against a real nats-server and real git: approved work
completes only when it is on the target branch, dependents wait for that, conflicts go
back to the workers (the last one to the operator's DLQ), two landers never land at once,
and a lander that dies after its push lands nothing twice."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient
from warp_harness import make_identity

from shared.git.landlock import LandingLocks
from shared.git.repository import RepositorySettings, RepositoryStore
from shared.models import WorkItem, WorkStatus, Workstream, WorkSubmission
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from shared.trace.tracing import read_timeline
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.bounded import bound_module_tests
from testsupport.events import work_actions
from testsupport.git import clone, make_origin, remote_sha, run_git
from testsupport.github import github_stand_in
from testsupport.work import work_queue
from warp.lander import Lander, next_pause
from warp.runtime import WarpRuntime
from warp.settings import WarpSettings
from warp.tools.work import item_text

S = WorkStatus
WORKER = "a" * 32
LANDER = "d" * 32
LANDER2 = "e" * 32


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"README.md": "hello\n", "shared.txt": "one\ntwo\n"})


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[NatsClient]:
    nc = NatsClient()
    await nc.connect(url)
    try:
        yield nc
    finally:
        await nc.close()


@asynccontextmanager
async def lander(
    url: str, project_id: str, folder: Path, agent_id: str, **options: Any
) -> AsyncIterator[Lander]:
    settings = WarpSettings(
        capabilities=("land",), auto_register=True, checkpoint_s=0, heartbeat_s=5.0, work_ack_wait_s=1.0
    )
    rt = WarpRuntime(make_identity(project_id, folder, agent_id, agent_type="lander"), settings, nats_url=url)
    rt.start()
    try:
        svc = await rt.services()
        yield Lander(svc, folder, poll_s=0.1, **options)
    finally:
        await rt.stop("test over")


async def set_repository(nc: NatsClient, project_id: str, origin: Path, **settings: Any) -> None:
    store = RepositoryStore(nc.jetstream(), ProjectNames(project_id))
    await store.put(RepositorySettings(url=str(origin), **settings), by="admin")


async def handed_in(
    q: WorkQueue, worker: Path, task: str, files: dict[str, str], **submission: Any
) -> WorkItem:
    """An item worked on in its own branch and completed by its worker, as Warp does it:
    claim, the branch pushed, the hand-in recorded, complete."""
    item = await q.submit(
        WorkSubmission.model_validate(
            {"task_id": task, "description": f"do {task}", "capability": "code", **submission}
        )
    )
    if item.status is S.BLOCKED:
        return item
    return await work_on(q, worker, item, files)


async def work_on(
    q: WorkQueue, worker: Path, item: WorkItem, files: dict[str, str], *, start: str = "origin/main"
) -> WorkItem:
    """``start``: where the worker's branch begins (a worker that ignores the target's
    news starts from the item's old base and conflicts again)."""
    claimed = await q.claim(Claimant(agent_id=WORKER, agent_type="generic", capabilities=("code",)))
    assert claimed is not None and claimed.id == item.id
    branch = f"loom/{item.task_id}"
    run_git("fetch", "--quiet", "origin", cwd=worker)
    base = run_git("rev-parse", start, cwd=worker)
    run_git("checkout", "--quiet", "-B", branch, start, cwd=worker)
    for rel, text in files.items():
        (worker / rel).write_text(text)
    run_git("add", "--all", cwd=worker)
    run_git("commit", "--quiet", "-m", f"work on {item.task_id}", cwd=worker)
    run_git("push", "--quiet", "--force", "origin", branch, cwd=worker)
    head = run_git("rev-parse", "HEAD", cwd=worker)
    ws = Workstream(branch=branch, base_ref="main", base_sha=base, head_sha=head, commits=1, files_changed=1)
    await q.record_workstream(item.id, WORKER, ws, step="handed-in")
    return await q.complete(item.id, WORKER, {"done": item.task_id})


async def test_landed_work_completes_and_only_then_unblocks_its_dependents(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin)
        q = work_queue(nc, names, ack_wait_s=1.0)
        first = await handed_in(q, worker, "first", {"a.txt": "a\n"})
        assert (first.status, first.landing is not None, first.assigned_to) == (S.LANDING, True, None)
        assert first.landing is not None and first.landing.author == WORKER
        after = await handed_in(q, worker, "after", {}, depends_on=[first.id])
        assert after.status is S.BLOCKED
        assert await q.queue_depths() == {"land": 1}

        async with lander(nats_server.url, project_id, tmp_path / "lander", LANDER) as landing:
            assert await landing.run_once() == 1
        done = await q.get(first.id)
        tip = remote_sha(origin, "refs/heads/main")
        assert done.status is S.COMPLETED and done.assigned_to == WORKER
        assert (
            done.landing is not None and done.landing.landed_sha == tip and done.landing.pending_sha is None
        )
        assert [a.outcome for a in done.landing.attempts] == ["landed"]
        assert remote_sha(origin, "refs/heads/loom/first") is None  # the landed branch is deleted
        assert (await q.get(after.id)).status is S.QUEUED  # unblocked only now
        actions = await work_actions(nc, names, first.id)
        assert actions[-4:] == ["landing", "landing-claimed", "landed", "completed"]
        spans, _ = await read_timeline(nc, names, first.id)  # the lander's steps in the item's trace
        assert {"land.build", "land.push", "work.land.pending", "work.land"} <= {s.name for s in spans}
        assert "completed" not in actions[:-1]

        # the dependent's workstream starts from a target that holds its dependency
        dependent = await work_on(q, worker, await q.get(after.id), {"b.txt": "b\n"})
        assert dependent.workstream is not None and dependent.workstream.base_sha == tip


async def test_a_conflict_goes_back_to_the_workers_and_the_last_allowed_one_to_the_dlq(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin, land_failures=2)
        q = work_queue(nc, names, ack_wait_s=1.0)
        ours = await handed_in(q, worker, "ours", {"shared.txt": "one\nTWO ours\n"})
        theirs = await handed_in(q, worker, "theirs", {"shared.txt": "one\nTWO theirs\n"})
        async with lander(nats_server.url, project_id, tmp_path / "lander", LANDER) as landing:
            assert await landing.run_once() == 2
            deferred = await q.get(theirs.id)  # it conflicts with ours, ahead of it in the batch
            assert deferred.status is S.LANDING and deferred.landing is not None
            assert (deferred.landing.failures, deferred.landing.attempts[-1].outcome) == (0, "deferred")
            assert await landing.run_once() == 1  # now with the target, which holds ours
            back = await q.get(theirs.id)
            assert back.status is S.QUEUED and back.assigned_to is None
            assert back.error is not None and "shared.txt" in back.error and "1 of 2" in back.error
            assert back.landing is not None and back.landing.failures == 1
            assert back.landing.attempts[-1].files == ["shared.txt"]
            assert remote_sha(origin, "refs/heads/loom/theirs") is not None  # its branch stays
            assert (await q.get(ours.id)).status is S.COMPLETED

            assert back.workstream is not None
            old_base = back.workstream.base_sha
            again = await work_on(q, worker, back, {"shared.txt": "one\nTWO theirs again\n"}, start=old_base)
            assert again.status is S.LANDING
            assert await landing.run_once() == 1
        dead = await q.get(theirs.id)
        assert dead.status is S.DEAD_LETTERED and dead.error is not None and "2 of 2" in dead.error
        assert "landing-failed" in await work_actions(nc, names, theirs.id)


async def test_a_lander_that_cannot_reach_the_repository_gives_the_batch_back_untouched(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin)
        q = work_queue(nc, names, ack_wait_s=1.0)
        item = await handed_in(q, worker, "one", {"a.txt": "a\n"})
        await set_repository(nc, project_id, tmp_path / "moved-away.git")
        async with lander(nats_server.url, project_id, tmp_path / "lander", LANDER) as landing:
            assert await landing.run_once() == 1
        back = await q.get(item.id)
        assert back.status is S.LANDING and back.assigned_to is None
        assert back.landing is not None and back.landing.failures == 0
        assert "cannot be reached" in back.landing.attempts[-1].detail
        assert await LandingLocks(nc.jetstream(), names).current("main") is None  # freed


async def test_a_landing_longer_than_a_renewal_frees_the_lock_when_it_ends(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    """The lock is renewed while the gate runs; freeing it at the end uses the revision of
    the last renewal, so the next lander need not wait for it to expire."""
    gate = tmp_path / "gate.py"
    gate.write_text("import time\ntime.sleep(1.5)\n")
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin, gate=[sys.executable, str(gate)])
        q = work_queue(nc, names, ack_wait_s=1.0)
        item = await handed_in(q, worker, "slow", {"s.txt": "s\n"})
        locks = LandingLocks(nc.jetstream(), names)
        async with lander(nats_server.url, project_id, tmp_path / "l1", LANDER, lock_ttl_s=60.0) as landing:
            seen: list[int] = []

            async def watch() -> None:  # the revisions the lock goes through while it lands
                while True:
                    held = await locks.current("main")
                    if held is not None and held.revision not in seen:
                        seen.append(held.revision)
                    await asyncio.sleep(0.05)

            watcher = asyncio.create_task(watch())
            try:
                assert await landing.run_once() == 1
            finally:
                watcher.cancel()
        assert len(seen) >= 3  # taken, given the batch, renewed at least once during the gate
        assert await locks.current("main") is None
        assert (await q.get(item.id)).status is S.COMPLETED


async def test_two_landers_never_land_at_once_and_each_item_lands_once(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    """Each gate run takes a file lock shared by both landers' hosts: were two landings
    ever at once, a gate would fail and an item would not land."""
    shared_lock = tmp_path / "gate.lock"
    gate = tmp_path / "gate.py"
    gate.write_text(
        "import os,sys,time\n"
        f"p = {str(shared_lock)!r}\n"
        "try:\n    fd = os.open(p, os.O_CREAT | os.O_EXCL)\n"
        "except FileExistsError:\n    print('two landings at once'); sys.exit(1)\n"
        "time.sleep(0.3); os.close(fd); os.unlink(p)\n"
    )
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin, gate=[sys.executable, str(gate)], land_batch=2)
        q = work_queue(nc, names, ack_wait_s=1.0)
        items = [await handed_in(q, worker, f"t{n}", {f"f{n}.txt": f"{n}\n"}) for n in range(6)]
        async with (
            lander(nats_server.url, project_id, tmp_path / "l1", LANDER) as one,
            lander(nats_server.url, project_id, tmp_path / "l2", LANDER2) as two,
        ):

            async def drain(landing: Lander) -> int:
                handled = 0
                for _ in range(200):
                    statuses = [(await q.get(i.id)).status for i in items]
                    if all(status is S.COMPLETED for status in statuses):
                        return handled
                    handled += await landing.run_once()
                    await asyncio.sleep(0.02)
                return handled

            counts = await asyncio.gather(drain(one), drain(two))
        assert sum(counts) == 6
        done = [await q.get(i.id) for i in items]
        assert all(d.status is S.COMPLETED for d in done)
        check = clone(origin, tmp_path / "check")
        merged = run_git("log", "--merges", "--format=%s", cwd=check).splitlines()
        assert sorted(merged) == sorted(f"Land t{n}: do t{n}" for n in range(6))  # each exactly once


async def test_a_lander_that_dies_after_its_push_lands_nothing_twice(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin)
        q = work_queue(nc, names, ack_wait_s=1.0)
        items = [await handed_in(q, worker, f"k{n}", {f"k{n}.txt": "k\n"}) for n in range(2)]
        pushed = asyncio.Event()
        async with lander(nats_server.url, project_id, tmp_path / "l1", LANDER, lock_ttl_s=1.0) as doomed:

            async def dead(*_: object, **__: object) -> None:  # gone right after its push
                pushed.set()
                await asyncio.Event().wait()

            async def kept(*_: object, **__: object) -> bool:  # a dead process frees nothing
                return False

            doomed.svc.work.settle_landing = dead  # type: ignore[method-assign,assignment]
            doomed.locks.release = kept  # type: ignore[method-assign]
            doomed._keep_alive = kept  # type: ignore[method-assign,assignment]
            running = asyncio.create_task(doomed.run_once())
            await asyncio.wait_for(pushed.wait(), 20)
            running.cancel()
            tip = remote_sha(origin, "refs/heads/main")
            async with lander(nats_server.url, project_id, tmp_path / "l2", LANDER2) as heir:
                for _ in range(100):
                    if await heir.run_once() == 2:
                        break
                    await asyncio.sleep(0.2)
                assert heir.last is not None and heir.last.stats.pushes == 0
        done = [await q.get(i.id) for i in items]
        assert all(d.status is S.COMPLETED and d.landing and d.landing.landed_sha == tip for d in done)
        assert remote_sha(origin, "refs/heads/main") == tip
        check = clone(origin, tmp_path / "check")
        assert len(run_git("log", "--merges", "--format=%s", cwd=check).splitlines()) == 2


def test_a_lander_backs_off_while_rounds_keep_giving_their_batch_back() -> None:
    pauses = [0.0]
    for _ in range(8):
        pauses.append(next_pause(pauses[-1], poll_s=0.5, handled=1, gave_back=True))
    assert pauses[1:] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert next_pause(30.0, poll_s=0.5, handled=2, gave_back=False) == 0.0  # landed: go on at once
    assert next_pause(30.0, poll_s=0.5, handled=0, gave_back=False) == 0.5  # idle: poll


def test_a_sent_back_item_tells_its_worker_what_to_fix() -> None:
    from shared.models import Landing, LandingAttempt

    base = WorkItem(id="c" * 32, project_id="p", task_id="t", description="d", capability="code")
    conflict = LandingAttempt(lander=LANDER, outcome="conflict", files=["src/a.py", "b.py"])
    sent_back = base.model_copy(update={"landing": Landing(target="main", failures=1, attempts=[conflict])})
    said = item_text(sent_back)
    assert "conflicts with main in src/a.py, b.py" in said and "merge main into the branch" in said
    failed = LandingAttempt(lander=LANDER, outcome="gate-failed", detail="FAILED test_login")
    gated = base.model_copy(update={"landing": Landing(target="main", failures=2, attempts=[failed])})
    assert "the gate failed" in item_text(gated) and "FAILED test_login" in item_text(gated)
    landed = base.model_copy(update={"landing": Landing(target="main", landed_sha="f" * 40)})
    assert f"landed on main in {'f' * 12}" in item_text(landed)
    assert "landing" not in item_text(base)


async def test_forge_mode_opens_a_pull_request_per_item_and_leaves_the_merge_to_github(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    token = "ghp_standin_token"
    async with github_stand_in("acme/app", token) as gh, connected(nats_server.url) as nc:
        forge = {"forge": "github", "github_repository": "acme/app", "github_api_url": gh.url}
        await set_repository(nc, project_id, origin, **forge)
        q = work_queue(nc, names, ack_wait_s=1.0)
        item = await handed_in(q, worker, "pr-one", {"a.txt": "a\n"})
        before = remote_sha(origin, "refs/heads/main")
        async with lander(
            nats_server.url, project_id, tmp_path / "l1", LANDER, github_token=token
        ) as landing:
            assert await landing.run_once() == 1
            waiting = await q.get(item.id)
            assert waiting.status is S.LANDING and waiting.assigned_to is None and waiting.landing is not None
            assert waiting.landing.pull_request == 1
            assert waiting.landing.pull_request_url == gh.pulls[1]["html_url"]
            pr = gh.pulls[1]
            assert (pr["head"]["ref"], pr["base"]["ref"]) == ("loom/pr-one", "main")
            assert f"Loom-Work-Id: {item.id}" in pr["body"] and pr["title"] == "pr-one: do pr-one"
            assert await landing.run_once() == 0  # it waits on GitHub, off the landers' queue
            assert await q.queue_depths() == {}
        assert remote_sha(origin, "refs/heads/main") == before  # the lander pushed nothing to the target
        assert "pull-request" in await work_actions(nc, names, item.id)

        other = await handed_in(q, worker, "pr-two", {"b.txt": "b\n"})
        async with lander(nats_server.url, project_id, tmp_path / "l2", LANDER2) as untokened:
            assert await untokened.run_once() == 1
        back = await q.get(other.id)  # no token on that host: given back, nothing counted
        assert back.status is S.LANDING and back.landing is not None and back.landing.pull_request is None
        assert back.landing.failures == 0 and "LOOM_GITHUB_TOKEN" in back.landing.attempts[-1].detail
        assert token not in back.model_dump_json()


async def test_with_the_veto_on_the_operator_answers_land_this_before_anything_lands(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    worker = clone(origin, tmp_path / "worker")
    names = ProjectNames(project_id)
    async with connected(nats_server.url) as nc:
        await set_repository(nc, project_id, origin, veto=True, land_batch=8)
        q = work_queue(nc, names, ack_wait_s=1.0)
        book = QuestionBook(nc, names, q)
        kept = await handed_in(q, worker, "kept", {"a.txt": "a\n"})
        refused = await handed_in(q, worker, "refused", {"b.txt": "b\n"})
        own_way = await handed_in(q, worker, "own-way", {"c.txt": "c\n"}, veto=False)  # its own say
        async with lander(nats_server.url, project_id, tmp_path / "lander", LANDER) as landing:
            assert await landing.run_once() == 3
            assert (await q.get(own_way.id)).status is S.COMPLETED  # landed without asking
            tip = remote_sha(origin, "refs/heads/main")
            asked = {i.id: await q.get(i.id) for i in (kept, refused)}
            for waiting in asked.values():
                assert (waiting.status, waiting.assigned_to) == (S.LANDING, None)
                assert waiting.question_id is not None and waiting.landing is not None
            questions = {question.work_id: question for question in await book.all()}
            assert set(questions) == set(asked)
            text = questions[kept.id].question
            assert text.startswith("Land this? kept: do kept") and kept.id in text
            assert "a.txt" in text and "work on kept" in text and "merges cleanly" in text
            assert questions[kept.id].id == asked[kept.id].question_id
            assert await q.queue_depths() == {}  # off the landers' queue while the operator decides
            assert await landing.run_once() == 0
            assert "waiting for the operator" in item_text(asked[kept.id])

            await book.answer(questions[refused.id].id, "split it: the b part is not wanted", by="alice")
            back = await q.get(refused.id)
            assert (back.status, back.reserved_for, back.question_id) == (S.QUEUED, WORKER, None)
            assert back.landing is not None and back.landing.failures == 0  # the operator's call
            last = back.landing.attempts[-1]
            assert (last.outcome, last.lander) == ("vetoed", "alice") and "b part" in last.detail
            assert "sent back by the operator" in item_text(back) and "b part" in item_text(back)

            await book.answer(questions[kept.id].id, "Land", by="alice")
            approved = await q.get(kept.id)
            assert approved.status is S.LANDING and approved.question_id is None
            assert approved.landing is not None and approved.landing.approved_by == "alice"
            assert remote_sha(origin, "refs/heads/main") == tip  # nothing landed before the lander
            assert await landing.run_once() == 1  # approved: landed without asking again
        done = await q.get(kept.id)
        assert done.status is S.COMPLETED and len(await book.all()) == 2
        check = clone(origin, tmp_path / "check")
        assert (check / "a.txt").exists() and not (check / "b.txt").exists()
        assert [
            a
            for a in await work_actions(nc, names, kept.id)
            if a in ("awaiting-approval", "landing-approved")
        ] == ["awaiting-approval", "landing-approved"]
        assert "landing-vetoed" in await work_actions(nc, names, refused.id)


def test_a_land_this_question_says_how_to_answer_and_fits_however_big_the_change() -> None:
    from shared.git.landing import DiffSummary
    from shared.models import MAX_QUESTION
    from warp.lander import approval_question

    ws = Workstream(branch="loom/big", base_ref="main", base_sha="1" * 40, head_sha="2" * 40, commits=30)
    item = WorkItem(
        id="c" * 32, project_id="p", task_id="big", description="a big change\nmore", capability="code"
    ).model_copy(update={"workstream": ws})
    small = DiffSummary(["abc1234 first"], 29, " a.py | 2 +-\n 1 file changed", ["a.py"])
    text = approval_question(item, "main", small)
    assert text.startswith(f"Land this? big: a big change (work {'c' * 32})")
    assert "loom/big onto main: 30 commit(s)" in text and "it conflicts in a.py now" in text
    assert "  abc1234 first\n  ... and 29 more" in text and " a.py | 2 +-" in text
    assert text.endswith("with your answer as the reason.")
    huge = DiffSummary(["abc1234 first"], 0, "\n".join(f" f{n}.py | 1 +" for n in range(2000)), [])
    cut = approval_question(item, "main", huge)
    assert len(cut) <= MAX_QUESTION and "(cut)" in cut and cut.endswith("with your answer as the reason.")
    assert "merges cleanly" in cut


# Twice a lander test hung in CI past its 120 s (never here, even beside CPU burners): each
# now fails at the await it waited on, with its traceback, instead of a dump of threads.
bound_module_tests(globals(), 100)
