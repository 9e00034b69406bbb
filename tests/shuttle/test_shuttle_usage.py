"""Usage errors (exit 2), Weft down (exit 3 naming the URL) and answers that
are not Weft's: everything that can be checked without a Weft."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from shuttle_helpers import run, run_process

from shuttle.zygote import ZYGOTE_ENV
from testsupport.env import without_fabric

WORK_ID = "0" * 32


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "No such option: --bogus"),
        (["work", "list", "--status", "sleeping"], "must be one of submitted, queued"),
        (["agents", "list", "--status", "asleep"], "must be one of online, busy, offline"),
        (["work", "list", "--limit", "0"], "--limit"),
        (["submit", "do it"], "--capability is required"),
        (["submit", "-c", "code"], "DESCRIPTION is required"),
        (["submit", "do it", "-c", "code", "--priority", "11"], "--priority"),
        (["submit", "do it", "-c", "Bad Cap"], "capability: must be lowercase letters"),
        (["submit", "do it", "-c", "code", "--deadline", "tomorrow"], "deadline: must be an ISO time"),
        (
            ["submit", "do it", "-c", "code", "--deadline", "2030-01-01T00:00:00"],
            "deadline: must include a timezone",
        ),
        (["submit", "do it", "-c", "code", "--context", "[1]"], "context: must be a JSON object"),
        (["submit", "do it", "-c", "code", "--context", "{bad"], "context: not valid JSON"),
        (["submit", "do it", "-c", "code", "--scope", "galaxy"], "scope: must be one of private"),
        (
            ["submit", "do it", "-c", "code", "--required-type", "A B"],
            "required_agent_type: must be lowercase letters",
        ),
        (["submit", "do it", "--file", "x.json"], "give a DESCRIPTION, --file or --interactive, not several"),
        (
            ["submit", "--file", "/nonexistent/batch.json"],
            "--file: cannot read it (No such file or directory)",
        ),
        (["watch"], "Missing argument 'work_id' (see 'shuttle watch --help')"),
        (["targets", "add", "t1"], "--mechanism: is required; `shuttle targets mechanisms` lists them"),
        (["targets", "add", "-m", "local"], "NAME is required"),
        (["targets", "add", "t1", "-m", "local", "--env", "NOEQUALS"], "--env: must be KEY=VALUE"),
        (["targets", "add", "t1", "-m", "local", "--command", "'unclosed"], "--command: cannot split"),
        (["targets", "update", "t1"], "nothing to change"),
        (["targets", "remove", "t1"], "refusing to remove the target without --yes"),
        (
            ["targets", "add", "--from-file", "/nonexistent.yaml"],
            "--from-file: cannot read it",
        ),
        (["--api-url", "nope", "work", "list"], "--api-url: api_url must be an http://"),
        (["--project", "NOT OK", "stats"], "--project: project_id must be lowercase"),
        (["fleet", "--watch", "--bogus"], "No such option: --bogus"),
    ],
)
def test_bad_usage_exits_2_with_one_line(args: list[str], message: str) -> None:
    r = run(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert r.stderr.startswith("shuttle: error: ") and r.stderr.count("\n") == 1
    assert r.stdout == ""


def test_no_arguments_shows_help_and_exits_2() -> None:
    r = run()
    assert r.exit_code == 2 and "submit" in r.stderr + r.stdout


def test_help_and_version() -> None:
    r = run("--help")
    assert r.exit_code == 0 and "fleet" in r.stdout and "targets" in r.stdout
    for group in ("agents", "work", "targets", "dlq", "config"):
        assert run(group, "--help").exit_code == 0
    r = run("--version")
    assert r.exit_code == 0 and r.stdout.startswith("shuttle ")
    r = run("version", "--json")
    assert r.exit_code == 0 and set(json.loads(r.stdout)) == {"shuttle"}


def test_completion_script_is_offered() -> None:
    r = run_process("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert r.exit_code == 0 and "_SHUTTLE_COMPLETE" in r.stdout


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("b.json", "{", "not valid JSON"),
        ("b.yaml", "a: [", "not valid YAML"),
        ("b.json", "[]", "holds no work items"),
        (
            "b.json",
            '[{"description": "x", "capability": "code"}, {"description": "y"}]',
            "item 2: capability: is required",
        ),
        ("b.yaml", "- description: x\n  capability: code\n  colour: red\n", "item 1: unknown field 'colour'"),
        (
            "b.yaml",
            "- description: x\n  capability: code\n  priority: 0\n",
            "item 1: priority: must be an integer",
        ),
        ("b.yaml", "- 42\n", "item 1: must be an object"),
        (
            "b.yaml",
            "- {description: x, capability: code, deadline: 2030-01-01 10:00:00}\n",
            "must include a timezone",
        ),
    ],
)
def test_bad_batch_files_are_refused_before_anything_is_sent(
    tmp_path: Path, dead_url: str, name: str, text: str, message: str
) -> None:
    # dead_url: were anything sent, the exit code would be 3, not 2
    r = run("--api-url", dead_url, "submit", "--file", _write(tmp_path, name, text))
    assert r.exit_code == 2, r.stderr
    assert message in r.stderr and r.stderr.count("\n") == 1


# -- Weft down -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["work", "list"],
        ["work", "show", WORK_ID],
        ["work", "cancel", WORK_ID],
        ["work", "retry", WORK_ID],
        ["agents", "list"],
        ["agents", "show", "a" * 32],
        ["agents", "shutdown", "a" * 32],
        ["submit", "do it", "-c", "code"],
        ["watch", WORK_ID],
        ["fleet"],
        ["fleet", "--json"],
        ["stats"],
        ["projects"],
        ["targets", "list"],
        ["targets", "show", "t1"],
        ["targets", "add", "t1", "-m", "local", "--command", "true"],
        ["targets", "update", "t1", "--max-concurrent", "2"],
        ["targets", "remove", "t1", "--yes"],
        ["targets", "enable", "t1"],
        ["targets", "disable", "t1"],
        ["targets", "test", "t1"],
        ["spin-up", "t1"],
        ["dlq", "list"],
        ["dlq", "retry", WORK_ID],
        ["dlq", "discard", WORK_ID],
        ["version", "--server"],
    ],
)
def test_weft_down_exits_3_naming_the_url(dead_url: str, args: list[str]) -> None:
    r = run("--api-url", dead_url, *args)
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert dead_url in r.stderr
    assert r.stderr.startswith("shuttle: error: cannot reach Weft") and r.stderr.count("\n") == 1
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_weft_down_as_a_process_uses_env_url(dead_url: str) -> None:
    r = run_process("fleet", "--json", env={"LOOM_API_URL": dead_url})
    assert r.exit_code == 3
    assert r.stderr == f"shuttle: error: cannot reach Weft at {dead_url} (Connection refused)\n"
    assert r.stdout == ""


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers (a hung Weft)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    sock.close()


def test_a_weft_that_does_not_answer_is_exit_3_with_the_timeout(silent_server: str) -> None:
    r = run("--api-url", silent_server, "--timeout", "0.3", "stats")
    assert r.exit_code == 3
    assert r.stderr == f"shuttle: error: Weft at {silent_server} did not answer within 0.3s\n"


class _NotWeft(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello</html>"
        self.send_response(200 if self.path.startswith("/api/stats") else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_weft() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotWeft)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_server_that_is_not_weft_is_exit_1_with_a_hint(not_weft: str) -> None:
    r = run("--api-url", not_weft, "stats")
    assert r.exit_code == 1
    assert "is not JSON (is this Weft?)" in r.stderr and r.stderr.count("\n") == 1
    r = run("--api-url", not_weft, "work", "show", WORK_ID)
    assert r.exit_code == 1
    assert f"not found at {not_weft} (is this Weft?)" in r.stderr


def _modules(*args: str) -> set[str]:
    """The modules a shuttle process of its own imported (from ``python -X importtime``; one
    forked from the suite's zygote imports nothing more than its stand-in needs)."""
    exe = str(Path(sys.executable).with_name("shuttle"))
    env = without_fabric(also=(ZYGOTE_ENV,))
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", exe, *args], capture_output=True, text=True, timeout=60, env=env
    )
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def _imported(*args: str) -> set[str]:
    """Top-level packages a shuttle process imported."""
    return {name.split(".")[0] for name in _modules(*args)}


def test_heavy_imports_stay_lazy(dead_url: str) -> None:
    heavy = {"httpx", "rich", "websockets", "yaml", "pydantic"}
    assert not heavy & _imported("config", "path")
    assert heavy & _imported("--api-url", dead_url, "work", "list", "--json") == {"httpx"}
    assert "websockets" not in _imported("--api-url", dead_url, "stats")


_LOADED = """
import json, sys
out, sys.argv = sys.argv[1], ["shuttle", *sys.argv[2:]]
from shuttle.cli import main
try:
    main()
except SystemExit:
    pass
with open(out, "w") as f:
    json.dump(sorted(m for m in sys.modules if m.startswith("shuttle.commands.")), f)
"""


def test_a_command_loads_only_its_own_module_and_help_loads_them_all(dead_url: str, tmp_path: Path) -> None:
    from shuttle.cli import COMMANDS

    def commands_loaded(*args: str) -> set[str]:
        out = tmp_path / "loaded.json"
        subprocess.run(
            [sys.executable, "-c", _LOADED, str(out), *args], capture_output=True, timeout=60, check=False
        )
        return set(json.loads(out.read_text()))

    assert commands_loaded("--api-url", dead_url, "work", "list", "--json") == {"shuttle.commands.work"}
    assert commands_loaded("answer", "--help") == {"shuttle.commands.questions"}
    every = {f"shuttle.commands.{module}" for module in COMMANDS.values()}
    assert commands_loaded("--help") == every


def test_every_command_module_defines_exactly_the_commands_listed_for_it() -> None:
    """A command a module adds but ``COMMANDS`` does not name would never be found."""
    from shuttle.cli import COMMANDS, _module_commands

    modules = {p.stem for p in (Path(__file__).parents[2] / "shuttle" / "commands").glob("*.py")}
    assert modules - {"__init__"} == set(COMMANDS.values())
    for module in modules - {"__init__"}:
        assert set(_module_commands(module)) == {n for n, m in COMMANDS.items() if m == module}, module


def test_fast_parameter_coercion_matches_typer_rules() -> None:
    from shuttle import fastparams

    assert fastparams.install() is True
    info = SimpleNamespace(min=1, max=10, clamp=False)
    assert fastparams._convert(int, "7", info) == 7
    with pytest.raises(ValueError, match="less than or equal to 10"):
        fastparams._convert(int, "11", info)
    with pytest.raises(ValueError, match=r"^must be an integer$"):
        fastparams._convert(int, "x", info)
    assert fastparams._convert(float, "0", SimpleNamespace(min=1, max=10, clamp=True)) == 1.0
    assert fastparams._convert(bool, "yes", None) is True and fastparams._convert(bool, "off", None) is False
    assert fastparams._plain(list[str]) == (str, True) and fastparams._plain(int | None) == (int, False)
    assert fastparams._plain(list[int]) is None and fastparams._plain(Path) is None
