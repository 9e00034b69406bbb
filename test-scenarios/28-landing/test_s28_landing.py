"""Scenario 28: landing (docs/landing.md). A bare repository is the project's origin; three
worker agents and one reviewer (Warp processes in their own clones) work through a plan of
eight items with dependencies, and ``loom-lander`` processes land what is approved, through
a gate (a script: it fails when ``bad.txt`` exists).

Two items change the same line (the second to land conflicts: it goes back to its author
with the file named, who merges the target into its branch, and it lands); one adds
``bad.txt`` (bisection isolates it from the batch it came in, the others land; its worker
hands it in unchanged, it fails again and goes to the DLQ after the project's two allowed
failures). The first lander is SIGKILLed while its gate runs; a second takes over once the
claims lapse and the lock expires. At the end the target's history holds exactly the landed
items, each once, in dependency order."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, BinaryIO

from scenario_harness import Fabric, ToolCallError, WarpAgent, agents_in, eventually, new_agent_id
from scenario_harness.agents import base_env

from testsupport.git import AUTHOR, clone, make_origin, run_git

FAST = {"LOOM_WORK_ACK_WAIT_S": "5", "LOOM_CHECKPOINT_S": "0"}
"""5 s, not 2: a worker's claim, its edit and its hand-in (a commit and a push) took over 2 s
once on a loaded machine, and the claim lapsed to another worker mid-way (a claim lives
its ack wait unless progress is reported). The workers also report progress before they
hand in: the lander's claims are the ones that must lapse quickly here (after its kill)."""
BIN = Path(sys.executable).parent
EDITS: dict[str, dict[str, str]] = {
    "a": {"a.txt": "a\n"},
    "b": {"b.txt": "b\n"},
    "c": {"shared.txt": "one\nC\nthree\n"},
    "d": {"shared.txt": "one\nD\nthree\n"},
    "e": {"e.txt": "e\n", "bad.txt": "breaks the build\n"},
    "f": {"f.txt": "f\n"},
    "g": {"g.txt": "g\n"},
    "h": {"h.txt": "h\n"},
}
AFTER = {"b": "a", "f": "b", "h": "g"}
PRIORITY = {"c": 8, "d": 8, "e": 8, "a": 7}  # the first batch: c, d, e and a
GATE = """\
import os, pathlib, sys, time
pathlib.Path({log!r}).open("a").write(" ".join(sorted(os.listdir("."))) + "\\n")
if os.path.exists("g.txt") and pathlib.Path({hold!r}).exists():
    pathlib.Path({held!r}).write_text(str(os.getpid()))
    while pathlib.Path({hold!r}).exists():
        time.sleep(0.05)
if os.path.exists("bad.txt"):
    print("bad.txt: this change breaks the build")
    sys.exit(1)
print("gate passed")
"""


def lander_env(fabric: Fabric, folder: Path, name: str) -> tuple[dict[str, str], BinaryIO]:
    """A lander's environment, its folder made, and the file its output goes to."""
    folder.mkdir(parents=True, exist_ok=True)
    env = base_env(fabric.home) | fabric.conn.env()
    env |= {
        "LOOM_PROJECT_ID": fabric.project_id,
        "LOOM_PROJECT_PATH": str(folder),
        "LOOM_AGENT_ID": new_agent_id(),
        "LOOM_HANDLE": name,
        "LOOM_LANDING_LOCK_S": "3",
        **FAST,
    }
    logs = fabric.workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return env, (logs / f"{name}.log").open("wb")


async def lander(fabric: Fabric, folder: Path, name: str) -> asyncio.subprocess.Process:
    """A ``loom-lander`` process for the project, polling often."""
    env, out = lander_env(fabric, folder, name)
    with out:
        return await asyncio.create_subprocess_exec(
            str(BIN / "loom-lander"), "--poll", "0.2", env=env, cwd=folder, stdout=out, stderr=out
        )


def merge_target(directory: Path, origin: Path) -> None:
    """What a worker does with a conflict: merge the target into its branch and settle
    the file by hand (keeping both changes)."""
    env = {**os.environ, **AUTHOR, "LC_ALL": "C"}
    pull = ["git", "pull", "--no-rebase", "--no-edit", str(origin), "main"]
    merged = subprocess.run(pull, cwd=directory, env=env, capture_output=True, check=False)
    assert b"CONFLICT" in merged.stdout, merged  # the target it conflicts with holds the other change
    (directory / "shared.txt").write_text("one\nC and D\nthree\n")
    run_git("add", "shared.txt", cwd=directory)
    run_git("commit", "--quiet", "--no-edit", cwd=directory)


async def worker(
    agent: WarpAgent, origin: Path, tasks: dict[str, str], stop: asyncio.Event, said: list[str]
) -> None:
    """Claim and do items until stopped. A tool that refuses a step (the claim lapsed on a
    loaded machine, Warp reconnecting) is noted in ``said`` and the worker goes on, as an
    agent would: the item is redelivered, and the end state is checked in full."""
    while not stop.is_set():
        try:
            if not await work_once(agent, origin, tasks):
                await asyncio.sleep(0.2)
        except ToolCallError as exc:
            said.append(f"{agent.name}: {exc}"[:600])
            await asyncio.sleep(0.2)


def worker_trouble(loops: list[asyncio.Task[None]], said: list[str]) -> str:
    """Raise at once if a worker died; else what the workers' tools refused so far."""
    for loop in loops:
        if loop.done() and not loop.cancelled() and loop.exception() is not None:
            failed = loop.exception()  # named here: the summary line shows it
            raise AssertionError(f"a worker failed: {failed!r}; refused before: {said}") from failed
    return "; ".join(said[-8:]) or "nothing"


async def work_once(agent: WarpAgent, origin: Path, tasks: dict[str, str]) -> bool:
    """Claim, do the task's edit (or review: approve), complete; a conflict is merged first.
    False when nothing was claimed."""
    out = await agent.call("warp_work_claim")
    if not out["claimed"]:
        return False
    item = out["item"]
    if out.get("review"):
        await agent.call("warp_work_review", work_id=item["id"], verdict="approve")
        return True
    directory = Path(out["workstream"]["directory"])
    attempts = (item.get("landing") or {}).get("attempts") or []
    if attempts and attempts[-1]["outcome"] == "conflict":
        merge_target(directory, origin)
    else:  # a first attempt; or a gate failure, handed in again unchanged (a stubborn worker)
        for rel, text in EDITS[tasks[item["id"]]].items():
            (directory / rel).write_text(text)
    # As an agent does between steps: the claim's deadline starts again, so the hand-in
    # (a commit and a push) has the whole ack wait however long the claim and merge took.
    await agent.call("warp_work_progress", work_id=item["id"], percent=90, note="edited")
    await agent.call("warp_work_complete", work_id=item["id"], result="done")
    return True


def trailers(origin: Path) -> list[str]:
    """The work ids of the merges on the target, oldest first."""
    text = run_git("log", "--reverse", "--merges", "--format=%B", "main", cwd=origin)
    return re.findall(r"^Loom-Work-Id: ([0-9a-f]{32})$", text, flags=re.M)


async def test_a_plan_lands_in_order_through_conflicts_a_bad_change_and_a_killed_lander(
    fabric: Fabric,
) -> None:
    git_dir = fabric.workdir / "git"
    git_dir.mkdir()
    origin = make_origin(git_dir, {"README.md": "hello\n", "shared.txt": "one\ntwo\nthree\n"})
    hold, held, gate_log = git_dir / "hold", git_dir / "held", git_dir / "gate.log"
    gate = git_dir / "gate.py"
    gate.write_text(GATE.format(log=str(gate_log), hold=str(hold), held=str(held)))
    await fabric.shuttle_json(
        "repo", "set", str(origin), "--gate", sys.executable, "--gate", str(gate), "--land-failures", "2"
    )

    ids: dict[str, str] = {}
    async with fabric.api() as api:
        for task in "acdegbfh":
            body: dict[str, Any] = {
                "task_id": task,
                "description": f"task {task}",
                "capability": "code",
                "priority": PRIORITY.get(task, 5),
                "review": {"capability": "review"},
            }
            if task in AFTER:
                body["depends_on"] = [ids[AFTER[task]]]
            posted = await api.post("/api/work", json=body)
            assert posted.status_code == 201, posted.text
            ids[task] = posted.json()["id"]
    tasks = {work_id: task for task, work_id in ids.items()}
    hosts = {name: clone(origin, git_dir / f"host-{name}") for name in ("ana", "ben", "cy", "rev")}

    async with AsyncExitStack() as stack:
        agents = await agents_in(  # at once: one by one took a minute on a loaded machine
            stack,
            fabric,
            {
                name: {
                    "capabilities": ["review"] if name == "rev" else ["code"],
                    "project_path": path,
                    "extra_env": FAST,
                }
                for name, path in hosts.items()
            },
        )
        stop = asyncio.Event()
        said: list[str] = []  # what the workers' tools refused
        loops = [asyncio.create_task(worker(a, origin, tasks, stop, said)) for a in agents.values()]
        try:

            async def stalled(exc: AssertionError) -> AssertionError:
                """A phase that timed out, with where each item stood and what was refused."""
                async with fabric.api() as api:
                    stood = {t: (await api.get(f"/api/work/{w}")).json()["status"] for t, w in ids.items()}
                return AssertionError(f"{exc}\nitems: {stood}\nrefused: {worker_trouble(loops, said)}")

            async def queued_for_landing() -> dict[str, Any] | None:
                worker_trouble(loops, said)
                async with fabric.api() as api:
                    body: dict[str, Any] = (await api.get("/api/landing")).json()
                return body if len(body["queue"]) == 5 else None

            try:
                await eventually(queued_for_landing, timeout=60, what="a, c, d, e and g queued for landing")
            except AssertionError as exc:
                raise await stalled(exc) from None
            hold.write_text("hold g's gate")
            first = await lander(fabric, fabric.workdir / "lander-1", "lander-1")

            async def in_gate() -> str | None:
                return held.read_text() if held.exists() else None

            try:  # g lands in the lander's second batch at the earliest: two builds, gates, pushes
                gate_pid = int(await eventually(in_gate, timeout=120, what="the gate of g's batch running"))
            except AssertionError as exc:  # say how far the lander got, from its own output
                runs = gate_log.read_text() if gate_log.exists() else "(none)\n"
                output = (fabric.workdir / "logs" / "lander-1.log").read_text()[-3000:]
                raise AssertionError(f"{exc}\ngate runs so far:\n{runs}lander-1 said:\n{output}") from None
            first.send_signal(signal.SIGKILL)  # mid-batch: its gate runs, nothing pushed yet
            await first.wait()
            os.kill(gate_pid, signal.SIGKILL)
            hold.unlink()
            landed_before = trailers(origin)
            assert ids["g"] not in landed_before
            second = await lander(fabric, fabric.workdir / "lander-2", "lander-2")
            try:

                async def all_final() -> dict[str, dict[str, Any]] | None:
                    worker_trouble(loops, said)  # a worker that failed says why at once
                    async with fabric.api() as api:
                        items = {t: (await api.get(f"/api/work/{w}")).json() for t, w in ids.items()}
                    final = all(i["status"] in ("completed", "dead-lettered") for i in items.values())
                    return items if final else None

                try:
                    items = await eventually(
                        all_final, timeout=120, interval=0.5, what="every item landed or failed"
                    )
                except AssertionError as exc:
                    raise await stalled(exc) from None
            finally:
                second.send_signal(signal.SIGTERM)
                try:  # bounded: a lander that does not stop must not hold the run (SIGKILL then)
                    await asyncio.wait_for(second.wait(), 20)
                except TimeoutError:
                    second.kill()
                    await second.wait()
                    raise AssertionError("lander-2 did not stop within 20 s of SIGTERM") from None
        finally:
            stop.set()
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    statuses = {t: i["status"] for t, i in items.items()}
    assert statuses == {t: "dead-lettered" if t == "e" else "completed" for t in ids}, statuses

    # the target holds exactly the landed items, each once, in dependency order
    history = trailers(origin)
    assert Counter(history) == Counter(w for t, w in ids.items() if t != "e"), history
    order = [tasks[w] for w in history]
    assert order.index("a") < order.index("b") < order.index("f") and order.index("g") < order.index("h")
    check = clone(origin, git_dir / "check")
    assert not (check / "bad.txt").exists() and (check / "shared.txt").read_text() == "one\nC and D\nthree\n"

    # one of c and d conflicted: it went back with the file named, was merged and landed
    conflicted = [t for t in "cd" if any(a["outcome"] == "conflict" for a in items[t]["landing"]["attempts"])]
    assert len(conflicted) == 1, conflicted
    back = items[conflicted[0]]
    assert any("conflicts with main in shared.txt" in e["error"] for e in back["errors"])
    assert back["landing"]["landed_sha"] is not None
    # ... to its own author: the same agent handed in both rounds (all authors stayed online)
    for sent_back in (back, items["e"]):
        authors = [r["author"] for r in sent_back["reviews"]]
        assert len(authors) >= 2 and len(set(authors)) == 1, authors

    # e was isolated by bisection, failed again, and went to the operator after two failures
    bad = items["e"]
    attempts = [a for a in bad["landing"]["attempts"] if a["outcome"] == "gate-failed"]
    assert bad["landing"]["failures"] == 2 and len(attempts) == 2
    assert "bad.txt: this change breaks the build" in attempts[0]["detail"]
    assert "landing failed (2 of 2)" in bad["error"]
    runs = gate_log.read_text().splitlines()
    first_batch = [r for r in runs[: next(i for i, r in enumerate(runs) if "g.txt" in r.split())]]
    assert 1 <= len(first_batch) <= 5  # one batch of four: at most 2*log2(4)+1 gate runs

    # g, whose landing was under way when its lander was killed, landed once
    assert history.count(ids["g"]) == 1
    assert items["g"]["landing"]["attempts"][-1]["outcome"] == "landed"

    shown = await fabric.shuttle("landing")
    assert "nothing waits to land" in shown.stdout and "nobody is landing" in shown.stdout
