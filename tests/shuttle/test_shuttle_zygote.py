"""``shuttle --zygote``: Shuttle commands forked from one pre-imported parent, each printing
and exiting exactly as a ``shuttle`` of its own (docs/shuttle.md, "Many commands in a row");
the mechanism is ``shared/zygote.py``, whose refusals and signals tests/warp/test_zygote.py
covers through Warp's."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from shuttle_helpers import Cli

from shuttle.zygote import ZYGOTE_ENV
from testsupport.env import without_fabric
from testsupport.zygote import ZygoteProcess, own_zygote

SHUTTLE = str(Path(sys.executable).with_name("shuttle"))


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[ZygoteProcess]:
    """A Shuttle zygote of this test's own (the suite's is left out of these tests)."""
    with own_zygote(tmp_path, "shuttle") as started:
        yield started


def _shuttle(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run([SHUTTLE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def _own_env(cli: Cli, project: str) -> dict[str, str]:
    env = without_fabric(also=(ZYGOTE_ENV,))
    return {**env, **cli.env, "LOOM_PROJECT_ID": project, "NO_COLOR": "1", "COLUMNS": "150"}


def _started_children(zygote: ZygoteProcess) -> int:
    return zygote.log.read_text().count(" started")


def test_forked_commands_print_and_exit_as_commands_of_their_own(
    cli: Cli, zygote: ZygoteProcess, tmp_path: Path
) -> None:
    submitted = cli.json("submit", "a forked listing", "--capability", "zygote-test")["id"]
    own = _own_env(cli, cli.project)
    forked = {**own, ZYGOTE_ENV: zygote.path}
    commands = [
        ["work", "list", "--json"],  # Weft answers
        ["work", "show", submitted, "--json"],
        ["work", "show", "0" * 32],  # Weft refuses: exit 1, one line
        ["work", "list", "--status", "nonsense"],  # a usage error: exit 2
        ["config", "path"],  # local only (HOME)
        ["--version"],
    ]
    for args in commands:
        alone = _shuttle(args, own, tmp_path)
        assert _shuttle(args, forked, tmp_path) == alone, args
    assert _started_children(zygote) == len(commands)  # each ran in a child of the zygote
    listed = _shuttle(["work", "list", "--json"], forked, tmp_path)[1]
    assert submitted in listed


def test_each_forked_command_reads_its_own_environment(
    cli: Cli, zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """The zygote imported Shuttle once; each child still takes its project, token and place
    from the environment and folder it was started with."""
    other = f"{cli.project}-other"
    mine = cli.json("submit", "in the first project", "--capability", "zygote-test")["id"]
    first = {**_own_env(cli, cli.project), ZYGOTE_ENV: zygote.path}
    second = {**_own_env(cli, other), ZYGOTE_ENV: zygote.path}
    code, out, _ = _shuttle(["work", "list", "--json"], first, tmp_path)
    assert code == 0 and mine in out
    code, out, _ = _shuttle(["work", "list", "--json"], second, tmp_path)
    assert code == 0 and mine not in out
    code, _, err = _shuttle(["work", "list"], {**first, "LOOM_API_TOKEN": "not-the-token"}, tmp_path)
    assert code == 1 and err.count("\n") == 1 and "not-the-token" not in err
    assert _started_children(zygote) == 3


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_a_forked_command_sees_the_shell_it_was_typed_in(
    shell: str, cli: Cli, zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """``--show-completion`` names the shell the command runs under, found by walking up
    from its process: a forked command starts that walk at its stand-in, not at the
    zygote (whose own parents are this test's). ``; true``: the shell cannot hand its
    process to the command, so it stays the command's parent."""
    own = _own_env(cli, cli.project) | {"HOME": str(tmp_path)}
    line = f"{SHUTTLE} --show-completion; true"

    def under_shell(env: dict[str, str]) -> tuple[int, str]:
        proc = subprocess.run([shell, "-c", line], env=env, capture_output=True, text=True, timeout=60)
        return proc.returncode, proc.stdout

    alone = under_shell(own)
    assert (shell == "bash") == ("complete" in alone[1]), alone  # bash has a script, sh none
    assert under_shell({**own, ZYGOTE_ENV: zygote.path}) == alone
    assert _started_children(zygote) == 1


def test_with_no_zygote_at_the_path_the_command_runs_on_its_own_and_says_so(cli: Cli, tmp_path: Path) -> None:
    own = _own_env(cli, cli.project)
    alone = _shuttle(["work", "list", "--json"], own, tmp_path)
    code, out, err = _shuttle(
        ["work", "list", "--json"], {**own, ZYGOTE_ENV: str(tmp_path / "nobody.sock")}, tmp_path
    )
    assert (code, out) == alone[:2]
    assert f"shuttle: no zygote at {ZYGOTE_ENV} took it" in err


def _watch(cli: Cli, env: dict[str, str], *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    """``shuttle fleet --watch``, piped: one screen per change, until a signal ends it. Its
    SIGINT is set either way: a test run started in the background by a shell without job
    control (as CI may be) has it ignored, and so would the command, rightly."""

    def set_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL)

    return subprocess.Popen(
        [SHUTTLE, "fleet", "--watch"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=set_sigint,
    )


def _next_screen(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        if line.startswith("Loom fleet"):
            return line
    raise AssertionError("fleet --watch ended")


def test_ctrl_c_ends_a_forked_command_as_it_ends_one_of_its_own(cli: Cli, zygote: ZygoteProcess) -> None:
    """SIGINT is passed on and raises KeyboardInterrupt in the child, as in a process of its
    own: Shuttle's exit code 130 and no traceback, not a death by the signal."""
    proc = _watch(cli, {**_own_env(cli, cli.project), ZYGOTE_ENV: zygote.path})
    try:
        _next_screen(proc)
        cli.json("submit", "seen live", "--capability", "zygote-test")
        _next_screen(proc)  # following Weft's events, as test_shuttle_fleet.py's Ctrl-C test does
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    assert "ended (130)" in zygote.log.read_text()


def test_a_signal_its_starter_ignored_stays_ignored(cli: Cli, zygote: ZygoteProcess) -> None:
    """Started with SIGINT ignored (as ``nohup`` or a shell's background job leaves it), the
    child ignores it too, as a command of its own would: the command goes on."""
    proc = _watch(cli, {**_own_env(cli, cli.project), ZYGOTE_ENV: zygote.path}, ignore_sigint=True)
    try:
        _next_screen(proc)
        proc.send_signal(signal.SIGINT)
        cli.json("submit", "after the ignored signal", "--capability", "zygote-test")
        _next_screen(proc)  # a screen drawn for the new item: still running
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM
