"""``weft --zygote``: Wefts forked from one pre-imported parent, serving, printing and ending
exactly as a ``weft`` of its own (docs/weft.md, "Many Wefts on one machine"); the mechanism
is ``shared/zygote.py``, whose refusals and signals tests/warp/test_zygote.py covers
through Warp's."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shared.nats.server import EmbeddedNatsServer, free_port
from testsupport.env import without_fabric
from testsupport.zygote import ZygoteProcess, own_zygote
from weft.zygote import ZYGOTE_ENV

WEFT = str(Path(sys.executable).with_name("weft"))


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZygoteProcess]:
    """A Weft zygote of these tests' own (the suite's is left out of them); each test counts
    what its log gained."""
    with own_zygote(tmp_path_factory.mktemp("weft-zygote"), "weft") as started:
        yield started


def _own_env(tmp_path: Path, nats: EmbeddedNatsServer, project: str) -> dict[str, str]:
    env = without_fabric(also=(ZYGOTE_ENV,))
    return env | {
        "NATS_URL": nats.url,
        "WEFT_PROJECT_ID": project,
        "LOOM_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
        "COLUMNS": "150",
    }


def _weft(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run([WEFT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def _serve(
    env: dict[str, str], port: int, log: Path, *, sigint: signal.Handlers = signal.SIG_DFL
) -> subprocess.Popen[bytes]:
    """``weft serve`` started with SIGINT at ``sigint`` (set either way: a test run started in
    the background by a shell without job control has it ignored)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [WEFT, "serve", "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
        )


def _healthy(port: int, proc: subprocess.Popen[bytes], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            if response.status_code == 200 and response.json().get("nats") == "connected":
                return dict(response.json())
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"weft did not become healthy:\n{log.read_text()[-3000:]}")


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _children(zygote: ZygoteProcess) -> list[str]:
    return [line for line in zygote.log.read_text().splitlines() if line.endswith(" started")]


def test_forked_commands_print_and_exit_as_commands_of_their_own(
    zygote: ZygoteProcess, nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    own = _own_env(tmp_path, nats_server, "zygote-cli")
    forked = own | {ZYGOTE_ENV: zygote.path}
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules: []\n")
    commands = [
        ["version"],
        ["check-policy", str(policy)],  # valid: its summary
        ["check-policy", str(tmp_path / "missing.yaml")],  # refused: one line, exit 2
        ["serve", "--port", "70000"],  # a usage error: exit 2, Typer's box
        [],  # no command: the help
    ]
    before = len(_children(zygote))
    for args in commands:
        alone = _weft(args, own, tmp_path)
        assert _weft(args, forked, tmp_path) == alone, args
    assert len(_children(zygote)) == before + len(commands)  # each ran in a child of the zygote


def test_a_forked_weft_serves_its_own_settings_and_stops_as_one_of_its_own(
    zygote: ZygoteProcess, nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    """Two Wefts at once from one zygote, each on its own port and default project; SIGTERM
    to a stand-in stops its Weft as SIGTERM stops one of its own (the same exit status)."""
    alone_log, first_log, second_log = (tmp_path / n for n in ("alone.log", "first.log", "second.log"))
    ports = [free_port() for _ in range(3)]
    before = len(_children(zygote))
    alone = _serve(_own_env(tmp_path / "a", nats_server, "zygote-alone"), ports[0], alone_log)
    first = _serve(
        _own_env(tmp_path / "f", nats_server, "zygote-first") | {ZYGOTE_ENV: zygote.path}, ports[1], first_log
    )
    second = _serve(
        _own_env(tmp_path / "s", nats_server, "zygote-second") | {ZYGOTE_ENV: zygote.path},
        ports[2],
        second_log,
    )
    try:
        assert _healthy(ports[0], alone, alone_log)["project_id"] == "zygote-alone"
        assert _healthy(ports[1], first, first_log)["project_id"] == "zygote-first"
        assert _healthy(ports[2], second, second_log)["project_id"] == "zygote-second"
        assert len(_children(zygote)) == before + 2
    finally:
        for proc in (alone, first, second):
            proc.send_signal(signal.SIGTERM)
    codes = [proc.wait(30) for proc in (alone, first, second)]
    assert codes[1] == codes[2] == codes[0], codes
    assert not any(_answers(port) for port in ports)
    assert "Application shutdown complete" in first_log.read_text()  # a clean stop, not a kill


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint-default", "sigint-ignored"])
def test_ctrl_c_stops_a_forked_weft_as_it_stops_one_of_its_own(
    sigint: signal.Handlers, zygote: ZygoteProcess, nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    """SIGINT is a person's normal stop: a clean shutdown and status 0. Weft's server sets its
    own handler, so even started with SIGINT ignored (``nohup``, a background job) a Weft of
    its own stops on it (tests/weft/test_weft_cli.py); the stand-in passes it on, and the
    forked one does the same."""
    log, port = tmp_path / "weft.log", free_port()
    env = _own_env(tmp_path, nats_server, "zygote-ctrl-c") | {ZYGOTE_ENV: zygote.path}
    proc = _serve(env, port, log, sigint=sigint)
    try:
        _healthy(port, proc, log)
    finally:
        proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Application shutdown complete" in log.read_text()


def test_killing_a_forked_wefts_stand_in_ends_the_weft(
    zygote: ZygoteProcess, nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    """SIGKILL to the process its starter holds (as a crashed pod goes): the Weft forked for
    it ends too, and its port is free for the next one."""
    log, port = tmp_path / "weft.log", free_port()
    proc = _serve(_own_env(tmp_path, nats_server, "zygote-killed") | {ZYGOTE_ENV: zygote.path}, port, log)
    _healthy(port, proc, log)
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while _answers(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _answers(port)
    deadline = time.monotonic() + 30  # the port closes as the child dies; the zygote reaps it after
    while "ended (-9)" not in zygote.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ended (-9)" in zygote.log.read_text()
    again = _serve(_own_env(tmp_path, nats_server, "zygote-killed") | {ZYGOTE_ENV: zygote.path}, port, log)
    try:
        _healthy(port, again, log)  # the same port, at once
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(30)


def test_with_no_zygote_at_the_path_weft_runs_on_its_own_and_says_so(
    nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    own = _own_env(tmp_path, nats_server, "zygote-none")
    code, out, err = _weft(["version"], own | {ZYGOTE_ENV: str(tmp_path / "nobody.sock")}, tmp_path)
    assert (code, out) == _weft(["version"], own, tmp_path)[:2]
    assert f"weft: no zygote at {ZYGOTE_ENV} took it" in err
