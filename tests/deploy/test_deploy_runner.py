"""The agent runner (deploy/runner, behind run-agent.sh): configuration errors,
what the agent is given, the deadline, and failure reports against a real nats-server."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from deploy.checks.common import REPO
from deploy.runner import cli, launch
from deploy.runner.config import ConfigError, agent_id_for, load
from deploy.runner.process import run_agent
from deploy.runner.report import report_failure
from shared.models import Event, WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from shared.work.rules import Claimant
from testsupport.work import work_queue

SCRIPT = REPO / "deploy" / "github-actions" / "run-agent.sh"
STAND_IN = Path(__file__).with_name("stand_in_agent.py")
WORK_ID = "0" * 31 + "1"


def base_env(**extra: str) -> dict[str, str]:
    env = {
        "LOOM_CORRELATION_ID": "run-42",
        "LOOM_WORK_ID": WORK_ID,
        "LOOM_CAPABILITY": "code",
        "LOOM_PROJECT_ID": "proj-a",
        "NATS_URL": "wss://agent:pw@nats.example.com",
        "AGENT_COMMAND": "my-agent --mcp-config {mcp_config} {prompt}",
        "LOOM_WARP_COMMAND": "warp",
    }
    env.update(extra)
    return env


# -- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"LOOM_CORRELATION_ID": ""}, "LOOM_CORRELATION_ID: is required"),
        ({"LOOM_CORRELATION_ID": "-bad id"}, "LOOM_CORRELATION_ID: must be"),
        ({"LOOM_WORK_ID": "w1"}, "LOOM_WORK_ID: must be 32 lowercase hex"),
        ({"LOOM_CAPABILITY": "Code Review"}, "LOOM_CAPABILITY"),
        ({"LOOM_PROJECT_ID": "Proj_A"}, "LOOM_PROJECT_ID"),
        ({"LOOM_AGENT_ID": "xyz"}, "LOOM_AGENT_ID"),
        ({"LOOM_AGENT_TYPE": "Claude Code"}, "LOOM_AGENT_TYPE"),
        ({"LOOM_TARGET_ID": "t 1"}, "LOOM_TARGET_ID: must be 1-128"),
        ({"LOOM_CORRELATION_ID": "", "LOOM_SPINUP_ID": "bad id"}, "LOOM_SPINUP_ID: must be"),
        ({"LOOM_CAPABILITY": "", "LOOM_WORK_ID": ""}, "LOOM_CAPABILITIES: give the agent's capabilities"),
        ({"LOOM_CAPABILITIES": "code,Bad Cap"}, "LOOM_CAPABILITIES"),
        ({"NATS_URL": ""}, "NATS_URL: is required"),
        ({"NATS_URL": "nats.example.com"}, "NATS_URL: must be a URL"),
        ({"NATS_URL": "ws://agent:pw@nats.example.com"}, "NATS_URL: scheme ws:// is not encrypted"),
        ({"AGENT_COMMAND": ""}, "AGENT_COMMAND: is required"),
        ({"AGENT_COMMAND": "agent 'unclosed"}, "AGENT_COMMAND: cannot be split"),
        ({"AGENT_COMMAND": "agent {workid}"}, "AGENT_COMMAND: unknown placeholder {workid}"),
        ({"AGENT_TIMEOUT_S": "soon"}, "AGENT_TIMEOUT_S: 'soon' is not a number"),
        ({"AGENT_TIMEOUT_S": "0"}, "AGENT_TIMEOUT_S: must be between"),
        ({"AGENT_TIMEOUT_S": "nan"}, "AGENT_TIMEOUT_S: must be between"),
        ({"AGENT_API_KEY_ENV": "1BAD"}, "AGENT_API_KEY_ENV: must be an environment variable name"),
        ({"AGENT_API_KEY_ENV": "NATS_PASS"}, "AGENT_API_KEY_ENV: must not be a NATS_ or LOOM_ variable"),
        ({"LOOM_WARP_COMMAND": "'unclosed"}, "LOOM_WARP_COMMAND: cannot be split"),
    ],
)
def test_bad_configuration_names_the_variable(
    change: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = base_env(**change)
    with pytest.raises(ConfigError, match=message.replace("{", r"\{").replace("}", r"\}")):
        load(env)
    assert cli.main(["run"], env) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert message.split(":")[0] in err
    assert "pw@" not in err


def test_insecure_nats_url_is_allowed_only_on_request() -> None:
    env = base_env(NATS_URL="nats://127.0.0.1:4222")
    assert load(env, allow_insecure=True).nats_url == "nats://127.0.0.1:4222"
    assert load({**env, "LOOM_RUNNER_ALLOW_INSECURE": "1"}).nats_url == "nats://127.0.0.1:4222"


def test_agent_id_is_derived_from_the_correlation_id_unless_given() -> None:
    derived = load(base_env()).agent_id
    assert derived == agent_id_for("run-42") and len(derived) == 32
    assert load(base_env(LOOM_CORRELATION_ID="run-43")).agent_id != derived
    assert load(base_env(LOOM_AGENT_ID="f" * 32)).agent_id == "f" * 32


def test_spinup_id_stands_in_for_the_correlation_id_and_capabilities_merge() -> None:
    env = base_env(LOOM_CORRELATION_ID="", LOOM_SPINUP_ID="a" * 32, LOOM_CAPABILITIES="review, code")
    config = load(env)
    assert config.correlation_id == config.spinup_id == "a" * 32
    assert config.capabilities == ("code", "review")
    without_work = load(base_env(LOOM_WORK_ID=""))
    assert without_work.work_id is None and without_work.spinup_id == "run-42"


def test_report_failure_needs_no_agent_command() -> None:
    config = load(base_env(AGENT_COMMAND=""), need_agent=False)
    assert config.agent_command == "" and config.warp_command == []


def test_the_script_reports_configuration_errors(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "LOOM_PYTHON": sys.executable, **base_env(LOOM_WORK_ID="bad")}
    done = subprocess.run(
        [str(SCRIPT), "run"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "LOOM_WORK_ID" in done.stderr


# -- what the agent is given ---------------------------------------------------------


def test_mcp_config_prompt_and_command(tmp_path: Path) -> None:
    env = base_env(
        NATS_PASS="s3cret",
        NATS_TLS_CA="/etc/ca.pem",
        AGENT_API_KEY="sk-test",
        AGENT_API_KEY_ENV="MY_KEY",
        LOOM_JS_REPLICAS="3",
        HOME="/home/x",
    )
    config = load(env)
    files = launch.write_files(config, env, tmp_path / "run")
    assert stat.S_IMODE(files["mcp_config"].stat().st_mode) == 0o600
    server = json.loads(files["mcp_config"].read_text())["mcpServers"]["warp"]
    assert server["command"] == "warp"
    warp_env = server["env"]
    assert warp_env["NATS_URL"] == env["NATS_URL"] and warp_env["NATS_PASS"] == "s3cret"
    assert warp_env["NATS_TLS_CA"] == "/etc/ca.pem" and warp_env["LOOM_JS_REPLICAS"] == "3"
    assert warp_env["LOOM_AGENT_ID"] == config.agent_id and warp_env["LOOM_PROJECT_ID"] == "proj-a"
    assert warp_env["LOOM_AUTO_REGISTER"] == "1" and warp_env["LOOM_CAPABILITIES"] == "code"
    assert warp_env["LOOM_SPINUP_ID"] == "run-42" and warp_env["LOOM_WORK_ID"] == WORK_ID
    assert "LOOM_CORRELATION_ID" not in warp_env and "LOOM_WARP_COMMAND" not in warp_env
    launch.check_warp_environment(warp_env)  # Warp's own loader accepts it
    assert "AGENT_API_KEY" not in warp_env and "sk-test" not in json.dumps(server)
    agent_env = launch.agent_environment(config, env, files)
    assert not [k for k in agent_env if k.startswith("NATS_")]
    assert agent_env["MY_KEY"] == "sk-test" and "AGENT_API_KEY" not in agent_env
    assert agent_env["LOOM_MCP_CONFIG"] == str(files["mcp_config"]) and agent_env["HOME"] == "/home/x"
    argv = launch.command_line(config, files)
    assert argv[:3] == ["my-agent", "--mcp-config", str(files["mcp_config"])]
    assert len(argv) == 4 and WORK_ID in argv[3] and "warp_work_claim" in argv[3]
    assert files["prompt_file"].read_text() == argv[3]


# -- the deadline --------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


async def test_a_timed_out_agent_and_its_children_are_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    outcome = await run_agent(["sh", "-c", script], {"PATH": os.environ["PATH"]}, timeout_s=1)
    assert outcome.timed_out and not outcome.ok
    assert "AGENT_TIMEOUT_S" in outcome.describe()
    child = int(pidfile.read_text())
    for _ in range(100):
        if not _alive(child):
            break
        await asyncio.sleep(0.05)
    assert not _alive(child)


async def test_exit_status_and_start_failures() -> None:
    ok = await run_agent(["sh", "-c", "exit 0"], {"PATH": os.environ["PATH"]}, timeout_s=30)
    assert ok.ok and ok.exit_code == 0
    failed = await run_agent(["sh", "-c", "exit 3"], {"PATH": os.environ["PATH"]}, timeout_s=30)
    assert not failed.ok and failed.describe() == "the agent exited with status 3"
    missing = await run_agent(["/nonexistent/agent"], {}, timeout_s=30)
    assert not missing.ok and "AGENT_COMMAND: cannot start" in missing.describe()


# -- against a real nats-server ---------------------------------------------------------


@pytest.fixture
def runner_env(nats_server: EmbeddedNatsServer, project_id: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "LOOM_RUNNER_ALLOW_INSECURE": "1",
        "LOOM_CORRELATION_ID": f"run-{project_id}",
        "LOOM_CAPABILITY": "code",
        "LOOM_PROJECT_ID": project_id,
        "LOOM_AGENT_TYPE": "claude-code",
        "NATS_URL": nats_server.url,
        "LOOM_WARP_COMMAND": "warp",
        "AGENT_TIMEOUT_S": "60",
    }


async def submit(nc: NatsClient, project_id: str) -> str:
    queue = work_queue(nc, ProjectNames(project_id))
    item = await queue.submit(WorkSubmission(task_id="t", description="write the thing", capability="code"))
    return item.id


def stand_in(mode: str) -> str:
    return f"{sys.executable} {STAND_IN} {{mcp_config}} {mode}"


async def test_the_script_runs_an_agent_that_completes_its_work(
    nc: NatsClient, project_id: str, runner_env: dict[str, str]
) -> None:
    work_id = await submit(nc, project_id)
    env = {
        **runner_env,
        "LOOM_WORK_ID": work_id,
        "AGENT_COMMAND": stand_in("complete"),
        "LOOM_PYTHON": sys.executable,
    }
    process = await asyncio.create_subprocess_exec(
        str(SCRIPT), "run", env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode == 0, err.decode()
    item = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert item.status == WorkStatus.COMPLETED
    assert item.assigned_to == agent_id_for(env["LOOM_CORRELATION_ID"])
    assert item.result == {"summary": "done by the stand-in"}


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("fail-exit", "the agent exited with status 1"), ("forget", "exited without completing or failing")],
)
async def test_a_failed_run_is_reported_as_a_work_failure(
    nc: NatsClient, project_id: str, runner_env: dict[str, str], mode: str, reason: str
) -> None:
    work_id = await submit(nc, project_id)
    env = {**runner_env, "LOOM_WORK_ID": work_id, "AGENT_COMMAND": stand_in(mode)}
    assert await cli.run(load(env), env) == cli.EXIT_AGENT_FAILED
    item = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert item.status == WorkStatus.QUEUED  # retried: attempts 1 of 3
    assert item.attempts == 1 and item.assigned_to is None
    (error,) = item.errors
    assert error.agent_id == agent_id_for(env["LOOM_CORRELATION_ID"])
    assert reason in error.error and env["LOOM_CORRELATION_ID"] in error.error


async def events(nc: NatsClient, project_id: str, kind: str) -> list[Event]:
    """Every event of ``kind`` the project's events stream holds right now."""
    js = nc.jetstream()
    names = ProjectNames(project_id)
    last = (await js.stream_info(names.events_stream)).state.last_seq
    sub = await js.subscribe(names.events_subjects, ordered_consumer=True)
    found: list[Event] = []
    try:
        while last:
            msg = await sub.next_msg(timeout=10)
            event = Event.model_validate_json(msg.data)
            if event.kind == kind:
                found.append(event)
            if msg.metadata.sequence.stream >= last:
                break
    finally:
        await sub.unsubscribe()
    return found


async def test_a_run_that_fails_before_claiming_leaves_the_work_queued_and_says_why(
    nc: NatsClient, project_id: str, runner_env: dict[str, str]
) -> None:
    work_id = await submit(nc, project_id)
    env = {**runner_env, "LOOM_WORK_ID": work_id, "AGENT_COMMAND": stand_in("exit-1")}
    assert await cli.run(load(env), env) == cli.EXIT_AGENT_FAILED
    item = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert item.status == WorkStatus.QUEUED and item.attempts == 0
    (event,) = [e for e in await events(nc, project_id, "spinup") if e.action == "failed"]
    assert event.data["work_id"] == work_id and event.data["correlation_id"] == env["LOOM_CORRELATION_ID"]
    assert "status 1" in event.data["error"]


async def test_report_failure_step_fails_what_the_agent_still_holds(
    nc: NatsClient, project_id: str, runner_env: dict[str, str]
) -> None:
    """The workflow's `if: failure() || cancelled()` step: a separate process, same correlation id."""
    work_id = await submit(nc, project_id)
    agent_id = agent_id_for(runner_env["LOOM_CORRELATION_ID"])
    queue = work_queue(nc, ProjectNames(project_id))
    claimed = await queue.claim(Claimant(agent_id=agent_id, agent_type="claude-code", capabilities=("code",)))
    assert claimed is not None and claimed.id == work_id
    env = {**runner_env, "LOOM_WORK_ID": work_id, "LOOM_PYTHON": sys.executable}
    process = await asyncio.create_subprocess_exec(
        str(SCRIPT), "report-failure", "--reason", "job cancelled", env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode == 0, err.decode()
    item = await queue.get(work_id)
    assert item.status == WorkStatus.QUEUED and "job cancelled" in (item.error or "")
    # Reporting again finds nothing held: no second failed attempt.
    report = await report_failure(nc, load(env, need_agent=False), "again")
    assert report.failed == [] and (await queue.get(work_id)).attempts == 1


async def test_unreachable_nats_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = base_env(NATS_URL=f"tls://agent:pw@127.0.0.1:{port}", AGENT_COMMAND="true")
    code = await asyncio.to_thread(cli.main, ["run"], env)
    assert code == cli.EXIT_NATS
    err = capsys.readouterr().err
    assert "cannot reach NATS" in err and "pw" not in err.replace("pwd", "")


def test_warp_settings_are_checked_with_warps_own_loader() -> None:
    env = base_env(LOOM_BOUNDARIES="default,Not Valid")
    with pytest.raises(ConfigError, match="LOOM_BOUNDARIES"):
        launch.check_warp_environment(launch.warp_environment(load(env), env))


async def test_a_bad_warp_setting_stops_the_run_before_the_agent_starts(
    nc: NatsClient, project_id: str, runner_env: dict[str, str], tmp_path: Path
) -> None:
    work_id = await submit(nc, project_id)
    marker = tmp_path / "agent-ran"
    env = {
        **runner_env,
        "LOOM_WORK_ID": work_id,
        "LOOM_HEARTBEAT_S": "0",
        "AGENT_COMMAND": f"touch {marker}",
    }
    code = await asyncio.to_thread(cli.main, ["run"], env)
    assert code == cli.EXIT_CONFIG and not marker.exists()


async def test_the_work_items_capability_is_used_when_none_is_given(
    nc: NatsClient, project_id: str, runner_env: dict[str, str], tmp_path: Path
) -> None:
    work_id = await submit(nc, project_id)
    env = {**runner_env, "LOOM_WORK_ID": work_id, "LOOM_CAPABILITY": "", "AGENT_COMMAND": "true"}
    config = await cli.with_capabilities(nc, load(env))
    assert config.capabilities == ("code",)
    missing = {**env, "LOOM_WORK_ID": "f" * 32}
    with pytest.raises(ConfigError, match="does not exist in project"):
        await cli.with_capabilities(nc, load(missing))
