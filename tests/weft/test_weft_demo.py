"""``weft demo`` (``make demo``): the loop closes on a throw-away fabric with the scripted
agent, and nothing is left behind — after a run, a failed step, or Ctrl-C."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from weft.banner import DEFAULT_API_URL, demo_commands
from weft.demo import WORK_FILE, end_processes_with, processes_with

WEFT = str(Path(sys.executable).parent / "weft")


def demo_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment, with a temporary folder of the test's own (the demo's data
    folder lands there, and every process the demo starts carries it in TMPDIR)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return {**os.environ, "TMPDIR": str(folder), "NO_COLOR": "1", "COLUMNS": "250"}


def left_behind(env: dict[str, str]) -> list[int]:
    return processes_with("TMPDIR", env["TMPDIR"])


def test_the_demo_closes_the_loop_stays_up_with_keep_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    proc = subprocess.Popen(
        [WEFT, "demo", "--keep"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:  # --keep: the loop closes, then the fabric stays up
            lines.append(line)
            if "The fabric stays up (--keep)" in line:
                break
        else:
            raise AssertionError("".join(lines) + proc.stderr.read())
        url = re.search(r"the console at (http://127\.0\.0\.1:\d+)/", lines[-1])
        assert url is not None, lines[-1]
        page = httpx.get(f"{url.group(1)}/", timeout=10)  # a newcomer opens the console on it
        assert page.status_code == 200 and "<title>Loom console</title>" in page.text
        proc.send_signal(signal.SIGINT)  # Ctrl-C: now it goes
        lines.append(proc.stdout.read())
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines)
    assert (
        "$ shuttle targets add demo -m local -c code -c review --command 'python -m weft.spinup.demo_agent'"
        in out
    )
    assert f"$ shuttle submit --file {WORK_FILE} --wait" in out
    listing = out.split("$ shuttle work list")[1].split("\nThe agents are idle now")[0]
    for description in yaml.safe_load(WORK_FILE.read_text())["items"]:  # each item done, by name
        assert any("completed" in row and description["description"] in row for row in listing.splitlines())
    _check_plan_and_review(out)
    assert "$ shuttle fleet" in out
    usage = out.split("$ shuttle usage --by model")[1].split("\nThe agents are idle now")[0]
    assert "scripted-demo" in usage, usage  # the demo agent reports usage like an AI agent would
    states = [line for line in out.splitlines() if line.startswith("  spin-ups: ")]
    assert (
        states
        and "stopped" in states[-1]
        and all(s in ("stopped", "failed", "timed-out") for s in _states(states[-1]))
    )
    assert "Done: Weft started agents for waiting work" in out
    assert not left_behind(env)
    assert not any(Path(env["TMPDIR"]).iterdir())  # its data folder went too


def _check_plan_and_review(out: str) -> None:
    """The plan ran in order (its graph: every item completed, the first one needed by the
    other two) and the reviewed step was approved by an agent other than its author."""
    graph = out.split("$ shuttle work graph ")[1].split("\nThe reviewed item")[0]
    plan = {i["name"]: i for i in yaml.safe_load(WORK_FILE.read_text())["items"]}
    assert all(i.get("after") in (None, ["count"]) for i in plan.values())
    lines = graph.splitlines()
    assert plan["count"]["task_id"] in lines[1] and lines[2].strip() == plan["count"]["description"]
    assert "unblocks" in lines[3]  # the first step (what it is under its ids), then
    for name in ("test", "document"):  # the two that waited for it
        assert any(plan[name]["task_id"] in line and "completed" in line for line in lines[3:]), graph
    # the point, in one line: two different agents (each with a handle of its own), approved
    said = re.search(
        r"The reviewed item demo-test-counter: written by (demo-[0-9a-f]{8}), reviewed by "
        r"(demo-[0-9a-f]{8}) \(approve, round 1\)",
        out,
    )
    assert said is not None and said.group(1) != said.group(2), out


def _states(line: str) -> list[str]:
    """``  spin-ups: 1 stopped, 2 stopped`` -> the state names."""
    return [part.split()[1] for part in line.split(": ", 1)[1].split(", ")]


def test_a_failed_step_is_one_line_and_exit_1_and_still_cleans_up(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    missing = tmp_path / "no-such-work.yaml"
    result = subprocess.run(
        [WEFT, "demo", "--work", str(missing)], env=env, capture_output=True, text=True, timeout=110
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "shuttle: error: --file: cannot read it (No such file or directory)" in result.stderr
    assert result.stderr.rstrip().endswith("weft demo: shuttle submit exited with 2")
    assert not left_behind(env) and not any(Path(env["TMPDIR"]).iterdir())


def test_ctrl_c_mid_demo_stops_the_agents_and_weft(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    proc = subprocess.Popen(
        [WEFT, "demo"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:  # interrupt once an agent has claimed work
            if "work.claimed" in line:
                break
        else:
            raise AssertionError(f"the demo ended before any claim: {proc.wait()}")
        assert [pid for pid in left_behind(env) if "demo_agent" in _cmdline(pid)]  # an agent runs
        proc.send_signal(signal.SIGINT)
        proc.stdout.read()
        assert proc.wait(90) == 130
        assert proc.stderr is not None and "weft demo: interrupted; cleaning up" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10  # reaped processes vanish from /proc a moment later
    while left_behind(env) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left_behind(env) and not any(Path(env["TMPDIR"]).iterdir())


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_banner_names_the_demo_commands_for_this_installation() -> None:
    here = Path(sys.executable).parent
    add, submit = demo_commands(DEFAULT_API_URL)
    add_argv = shlex.split(add.replace("\\\n", " "))
    assert add_argv[:4] == [str(here / "shuttle"), "targets", "add", "demo"]
    command = add_argv[add_argv.index("--command") + 1]
    assert shlex.split(command)[1:] == ["-m", "weft.spinup.demo_agent"]
    assert Path(shlex.split(command)[0]).parent == here  # this installation's Python
    assert shlex.split(submit)[:2] == [str(here / "shuttle"), "submit"] and "--wait" in submit
    elsewhere = demo_commands("http://127.0.0.1:9000")  # Shuttle must be told where Weft is
    assert all(
        shlex.split(c.replace("\\\n", " "))[1:3] == ["--api-url", "http://127.0.0.1:9000"] for c in elsewhere
    )


RESPAWNS = """
import os, signal, subprocess, sys, time
def stop(signum, frame):  # told to stop, it starts one more first (as an agent starting its Warp)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(120)
"""


def test_ending_marked_processes_also_ends_one_started_while_they_were_ended(tmp_path: Path) -> None:
    marker = str(tmp_path)
    env = {**os.environ, "LOOM_DEMO_TEST_MARK": marker}
    proc = subprocess.Popen(
        [sys.executable, "-c", RESPAWNS], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    assert processes_with("LOOM_DEMO_TEST_MARK", marker) == [proc.pid]
    end_processes_with("LOOM_DEMO_TEST_MARK", marker)
    proc.wait(10)
    assert processes_with("LOOM_DEMO_TEST_MARK", marker) == []
