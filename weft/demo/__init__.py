"""``weft demo`` (``make demo``): the whole loop on a throw-away fabric, no AI agent needed.

It starts ``weft serve`` (with its bundled nats-server) on free ports over a temporary
data folder, registers a ``local`` target that runs the demo agent
(:mod:`weft.spinup.demo_agent`), submits the plan in ``work.yaml`` with Shuttle and
follows it: Weft starts agents for the waiting work, they complete it in dependency
order, another agent reviews the step that asks for review, and Weft shuts them down
once idle. Every step is a Shuttle command, printed before it runs, so the demo
doubles as a tour of the commands. Nothing is left behind: the agents are stopped (by
Weft; any it missed, by the demo), Weft is stopped and the folder removed.

The work is one file (``--work``): any batch or plan ``shuttle submit --file`` takes.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from shared.nats.server import free_port
from shared.tls import client_tls

WORK_FILE = Path(__file__).with_name("work.yaml")
PROJECT = "demo"
TARGET = "demo"
IDLE_TIMEOUT_S = 5
WORK_S = 2
"""How long the demo agent works on an item: long enough to see agents busy in parallel."""
FIRST_TASK = "demo-count-errors"
"""The plan's first step (``work.yaml``): its graph shows the whole plan."""
REVIEWED_TASK = "demo-test-counter"
"""The step that asks for review."""
WAIT_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
ENDED_STATES = frozenset({"stopped", "failed", "timed-out"})


def bin_dir() -> Path:
    """Where this interpreter's console scripts (weft, shuttle, warp) are."""
    return Path(sys.executable).parent


def target_command(python: str = sys.executable) -> list[str]:
    """``shuttle`` arguments that register the demo target: a local process running the demo
    agent (it works and reviews), up to three at once, shut down after a few idle seconds."""
    return [
        "targets", "add", TARGET, "-m", "local", "-c", "code", "-c", "review",
        "--command", f"{python} -m weft.spinup.demo_agent",
        "--max-concurrent", "3", "--idle-timeout", str(IDLE_TIMEOUT_S),
        "--env", f"LOOM_DEMO_WORK_S={WORK_S}",
    ]  # fmt: skip


def clean_environment(data_dir: Path, port: int) -> dict[str, str]:
    """Weft's environment: none of the caller's NATS/Loom/Weft settings (the demo must not
    touch a fabric of theirs), its own ports and data folder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NATS_", "LOOM_", "LOOMINAL_", "WEFT_")) and k != "XDG_DATA_HOME"
    }
    env.update(
        LOOM_DATA_DIR=str(data_dir),
        WEFT_PORT=str(port),
        WEFT_NATS_PORT="-1",
        WEFT_NATS_WS_PORT="-1",
        WEFT_PROJECT_ID=PROJECT,
        WEFT_SWEEP_INTERVAL_S="1",
        WEFT_LOG_LEVEL="WARNING",
    )
    return env


def processes_with(name: str, value: str) -> list[int]:
    """Processes of this user whose environment sets ``name`` to ``value``: with Loom's data
    folder, Weft and every agent it started (they inherit Weft's environment). Linux ``/proc``."""
    marker = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def end_processes(pids: Sequence[int], grace_s: float = 5) -> None:
    """SIGTERM, then SIGKILL to what is still there after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
            time.sleep(0.1)


def end_processes_with(name: str, value: str, rounds: int = 3) -> None:
    """End every process whose environment sets ``name`` to ``value`` (:func:`processes_with`);
    one started meanwhile by a process being ended (an agent starting its Warp as it was
    stopped) is ended in the next round."""
    for _ in range(rounds):
        pids = processes_with(name, value)
        if not pids:
            return
        end_processes(pids)


def serve_in_background(
    args: Sequence[str], env: dict[str, str], cwd: Path, log: Path
) -> subprocess.Popen[bytes]:
    """``weft <args>`` in its own session (so Ctrl-C at the terminal reaches only its caller,
    which then stops it in order), its output in ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(bin_dir() / "weft"), *args],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    """Until Weft at ``url`` answers ``/health``; :class:`DemoFailed` with its log if it exits
    or does not answer in time."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2, verify=client_tls(url)) as http:  # one client: it costs more than a poll
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DemoFailed(f"weft exited with {proc.returncode}:\n{_tail(log)}")
            with contextlib.suppress(httpx.TransportError):
                if http.get(f"{url}/health").status_code == 200:
                    return
            time.sleep(0.05)
    raise DemoFailed(f"weft did not become healthy:\n{_tail(log)}")


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """SIGTERM (Weft shuts down in order), SIGKILL to its group if it does not end in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        return log.read_text(errors="replace")[-4000:]
    return ""


class Demo:
    """One run: a fabric of its own, the steps, and the clean-up."""

    def __init__(self, work_file: Path) -> None:
        self.work_file = work_file
        self.data_dir = Path(tempfile.mkdtemp(prefix="loom-demo-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.url, timeout=10, verify=client_tls(self.url))
        self.weft: subprocess.Popen[bytes] | None = None
        self.shuttle_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "LOOMINAL_"))},
            "LOOM_API_URL": self.url,
            "LOOM_PROJECT_ID": PROJECT,
            "LOOM_CONFIG": str(self.data_dir / "shuttle.toml"),  # not the user's settings
        }

    # -- the fabric -----------------------------------------------------------------
    def start(self) -> None:
        log = self.data_dir / "weft.log"
        env = clean_environment(self.data_dir, self.port)
        self.weft = serve_in_background(["serve"], env, self.data_dir, log)
        wait_healthy(self.url, self.weft, log)

    def close(self) -> None:
        """Agents first (through Weft while it runs), then Weft, then anything still marked."""
        if self.weft is not None and self.weft.poll() is None:
            with contextlib.suppress(httpx.HTTPError, DemoFailed):
                self._shut_agents_down()
        if self.weft is not None:
            stop_process(self.weft)
        end_processes_with("LOOM_DATA_DIR", str(self.data_dir))
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.http.close()

    def _shut_agents_down(self, timeout: float = 20) -> None:
        """No new agents from the target; every agent that is (or comes) online is asked to
        leave, until every spin-up has ended."""
        self.http.post(f"/api/targets/{TARGET}/disable")  # 404 before it exists
        asked: set[str] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(state in ENDED_STATES for state in self.spinup_states()):
                return
            agents = self.http.get("/api/agents", params={"limit": 1000}).json()["items"]
            ids = [
                a["agent_id"] for a in agents if a.get("status") != "offline" and a["agent_id"] not in asked
            ]
            if ids:
                self.http.post(
                    "/api/agents/shutdown-batch",
                    json={"agent_ids": ids, "reason": "the demo is over", "grace_s": 5},
                )
                asked.update(ids)
            time.sleep(0.3)

    # -- the steps ------------------------------------------------------------------
    def shuttle(self, *args: str, shown: Sequence[str] | None = None, check: bool = True) -> int:
        """Run one Shuttle command as the reader would, printing it first."""
        print(f"\n$ shuttle {shlex.join(shown if shown is not None else args)}", flush=True)
        code = subprocess.run([str(bin_dir() / "shuttle"), *args], env=self.shuttle_env).returncode
        if check and code != 0:
            raise DemoFailed(f"shuttle {args[0]} exited with {code}")
        return code

    def work_id(self, task_id: str) -> str | None:
        """The id of the demo's item with this task id (None when the work file has none)."""
        listing: dict[str, Any] = self.http.get("/api/work", params={"limit": 100}).json()
        return next((w["id"] for w in listing.get("items", []) if w.get("task_id") == task_id), None)

    def review_summary(self, work_id: str) -> str:
        """The demo's point in one line: the reviewed item's author and reviewer are two agents."""
        item: dict[str, Any] = self.http.get(f"/api/work/{work_id}").json()
        agents = self.http.get("/api/agents", params={"limit": 1000}).json()["items"]
        handles = {a["agent_id"]: a.get("handle") or a["agent_id"][:8] for a in agents}
        rounds = item.get("reviews") or []
        if not rounds:
            return f"{item.get('task_id')}: no review was recorded"
        last = rounds[-1]
        author = handles.get(last.get("author") or "", "?")
        reviewer = handles.get(last.get("reviewer") or "", "?")
        verdict = last.get("verdict") or "?"
        return (
            f"The reviewed item {item.get('task_id')}: written by {author}, reviewed by {reviewer} "
            f"({verdict}, round {len(rounds)}): two different agents, as the review rule requires."
        )

    def spinup_states(self) -> dict[str, int]:
        stats: dict[str, Any] = self.http.get("/api/stats").json()
        by_state = (stats.get("spinups") or {}).get("by_state") or {}
        return {k: int(v) for k, v in by_state.items() if v}

    def wait_for_agents_to_stop(self, *, quiet: bool = False, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Until every spin-up has ended, printing the states as they change."""
        deadline = time.monotonic() + timeout
        last: dict[str, int] | None = None
        while time.monotonic() < deadline:
            states = self.spinup_states()
            if states != last and not quiet:
                print("  spin-ups: " + (", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"))
                last = states
            if all(state in ENDED_STATES for state in states):
                return True
            time.sleep(0.5)
        return False

    def run(self) -> None:
        print(
            "Loom demo: a throw-away fabric (Weft and its nats-server, data in "
            f"{self.data_dir}), a spin-up target that runs a scripted agent (no AI), "
            f"and the work in {self.work_file}.",
            flush=True,
        )
        self.start()
        print(f"Weft is up at {self.url} (project {PROJECT}).", flush=True)
        shown_target = target_command(python="python")
        self.shuttle(*target_command(), shown=shown_target)
        self.shuttle("submit", "--file", str(self.work_file), "--wait", "--wait-timeout", str(WAIT_TIMEOUT_S))
        self.shuttle("work", "list")
        first, reviewed = self.work_id(FIRST_TASK), self.work_id(REVIEWED_TASK)
        if first is not None:
            print("\nThe plan: what came after what, and each item's state:", flush=True)
            self.shuttle("work", "graph", first)
        if reviewed is not None:
            print(f"\n{self.review_summary(reviewed)}", flush=True)
        print("\nWhat the agents reported using (a scripted agent: tokens, no cost):", flush=True)
        self.shuttle("usage", "--by", "model")
        print(f"\nThe agents are idle now; Weft shuts each down after {IDLE_TIMEOUT_S} s idle:", flush=True)
        if not self.wait_for_agents_to_stop():
            raise DemoFailed(f"the agents were not shut down within {STOP_TIMEOUT_S} s")
        self.shuttle("fleet")
        print(
            "\nDone: Weft started agents for waiting work, they completed it in plan order "
            "(one reviewed by another agent), and Weft stopped them once idle.\n"
            "The same, on your own fabric: `make run`, then the README's walkthrough.",
            flush=True,
        )

    def stay_up(self) -> None:
        """``--keep``: the fabric stays up for its console and Shuttle until Ctrl-C."""
        print(
            f"\nThe fabric stays up (--keep): the console at {self.url}/ (project {PROJECT}); "
            f"Shuttle with LOOM_API_URL={self.url} LOOM_PROJECT_ID={PROJECT}. Ctrl-C stops it "
            f"and removes {self.data_dir}.",
            flush=True,
        )
        while self.weft is not None and self.weft.poll() is None:
            time.sleep(0.5)


class DemoFailed(Exception):
    """A step of the demo did not do what it should (the message says which)."""


@contextlib.contextmanager
def _signals(handler: Any) -> Iterator[None]:
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the demo the way Ctrl-C does: through the clean-up."""
    raise KeyboardInterrupt


def run_demo(work_file: Path = WORK_FILE, *, keep: bool = False) -> int:
    """Run the demo; 0 when the loop closed, 1 when a step failed, 130 when interrupted. With
    ``keep``, a demo that closed its loop stays up (console, API) until Ctrl-C, then goes."""
    demo = Demo(work_file)
    try:
        with _signals(_interrupt):
            demo.run()
        if keep:
            with _signals(_interrupt), contextlib.suppress(KeyboardInterrupt):
                demo.stay_up()
        return 0
    except DemoFailed as exc:
        print(f"weft demo: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("\nweft demo: interrupted; cleaning up", file=sys.stderr, flush=True)
        return 130
    finally:
        with _signals(signal.SIG_IGN):  # the clean-up is bounded; a second Ctrl-C must not cut it short
            demo.close()
