"""The plugin run as a host runs it (docs/hosts.md), against a live fabric: the MCP server
of ``.mcp.json`` (and of the Agent Plugins ``mcp.json``) started exactly as the host starts
it, its placeholders expanded, listing Warp's and Pattern's tools over MCP; each hook of
``hooks/hooks.json`` run through a shell with the host's documented JSON on standard input;
the launcher's message when Loom is not installed.

The test process stands in for the host: it starts Warp, so Warp notes itself under this
process's id, and the hooks it runs find that agent the way a session's hooks find theirs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from nats.aio.client import Client as NatsClient

from shared.leases.book import LeaseBook
from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer, free_port
from shared.work.moves import Claimant
from testsupport.env import without_fabric
from testsupport.git import clone, make_origin
from testsupport.work import work_queue
from warp.messages import InboxService

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "loom"
BIN = Path(sys.executable).parent
OTHER = "b" * 32


def expand(value: str, variable: str = "CLAUDE_PLUGIN_ROOT") -> str:
    return value.replace("${" + variable + "}", str(PLUGIN))


def host_env(nats_url: str, project_id: str, home: Path, **extra: str) -> dict[str, str]:
    """What the host's processes get: its own environment (here: the test's, without any
    Loom or NATS setting of the machine's) plus the session's settings and the plugin root."""
    env = without_fabric(also=("CLAUDE_",))
    env.update(
        NATS_URL=nats_url,
        LOOM_PROJECT_ID=project_id,
        LOOM_BIN=str(BIN),  # the launcher's configured location of Loom
        HOME=str(home),
        CLAUDE_PLUGIN_ROOT=str(PLUGIN),
        **extra,
    )
    return env


@asynccontextmanager
async def started_server(
    config: dict[str, Any],
    env: dict[str, str],
    cwd: Path,
    errlog: Path,
    variable: str,
    server_only: dict[str, str] | None = None,
) -> AsyncIterator[ClientSession]:
    """``server_only``: settings the server gets and the hooks do not (e.g. an instance)."""
    params = StdioServerParameters(
        command=expand(config["command"], variable),
        args=[expand(a, variable) for a in config.get("args", [])],
        env={
            **env,
            **{k: expand(v, variable) for k, v in config.get("env", {}).items()},
            **(server_only or {}),
        },
        cwd=str(cwd),
    )
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def run_hook(event: str, env: dict[str, str], payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The hook's command from hooks.json, through a shell as the host runs a command hook."""
    (group,) = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"][event]
    (handler,) = group["hooks"]
    return subprocess.run(
        ["sh", "-c", expand(handler["command"])],
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def call(session: ClientSession, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await session.call_tool(tool, args or {})
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    origin = make_origin(
        tmp_path, {"README.md": "hello\n", "src/app.py": "x = 1\n", "src/other.py": "y = 2\n"}
    )
    return clone(origin, tmp_path / "session")


@pytest.mark.parametrize(
    ("manifest", "variable"), [(".mcp.json", "CLAUDE_PLUGIN_ROOT"), ("mcp.json", "PLUGIN_ROOT")]
)
async def test_the_mcp_server_starts_as_the_host_starts_it_and_lists_warps_and_patterns_tools(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path, manifest: str, variable: str
) -> None:
    config = json.loads((PLUGIN / manifest).read_text())["mcpServers"]["loom"]
    env = host_env(nats_server.url, project_id, tmp_path, PLUGIN_ROOT=str(PLUGIN))
    async with started_server(config, env, tmp_path, tmp_path / "warp.err", variable) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"warp_work_claim", "warp_lease_acquire", "warp_work_review", "pattern_core_memory"} <= tools
        me = await call(session, "warp_registry_register", {"capabilities": ["code"]})
        assert me["status"] == "online" and len(me["agent_id"]) == 32


async def test_the_session_start_hook_briefs_the_agent_and_installs_the_git_guard(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path, checkout: Path
) -> None:
    names = ProjectNames(project_id)
    config = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["loom"]
    env = host_env(nats_server.url, project_id, tmp_path)
    queue = work_queue(nc, names)
    theirs = await queue.submit(WorkSubmission(task_id="theirs", description="Not yours", capability="code"))
    assert (await queue.claim(Claimant(agent_id=OTHER, agent_type="x", capabilities=("code",)))) is not None
    item = await queue.submit(
        WorkSubmission(task_id="fix-login", description="Fix the login form\nmore", capability="code")
    )
    async with started_server(config, env, checkout, tmp_path / "warp.err", "CLAUDE_PLUGIN_ROOT") as session:
        me = await call(session, "warp_registry_register", {"capabilities": ["code"]})
        assert (await call(session, "warp_work_claim"))["item"]["id"] == item.id
        await InboxService(nc, nc.jetstream(), names).send(
            sender_id=OTHER, sender_handle="other", recipient_id=me["agent_id"], body="ping"
        )
        payload = {
            "session_id": "s1",
            "transcript_path": str(tmp_path / "t.jsonl"),
            "cwd": str(checkout),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
        done = run_hook("SessionStart", env, payload)
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert f"you are agent {me['handle']} ({me['agent_id']})" in said
    assert f"- {item.id} [claimed] fix-login: Fix the login form" in said
    assert "Assigned to you: 1 item(s)." in said and theirs.id not in said  # another agent's item
    assert "1 direct message(s) waiting" in said
    hooks = checkout / ".git" / "hooks"
    assert (
        "loom-guard" in (hooks / "pre-commit").read_text()
        and "loom-guard" in (hooks / "pre-push").read_text()
    )
    assert "installed loom-guard" in said

    again = run_hook("SessionStart", env, payload)  # installed once; never over another tool's
    assert again.returncode == 0 and "installed loom-guard" not in again.stdout


async def test_the_session_start_hook_leaves_another_tools_git_hooks_alone_and_says_when_out_of_reach(
    project_id: str, tmp_path: Path, checkout: Path
) -> None:
    theirs = checkout / ".git" / "hooks" / "pre-commit"
    theirs.write_text("#!/bin/sh\nexit 0\n")
    env = host_env(f"nats://127.0.0.1:{free_port()}", project_id, tmp_path)
    done = run_hook("SessionStart", env, {"hook_event_name": "SessionStart", "cwd": str(checkout)})
    assert done.returncode == 0
    assert "the fabric is out of reach now" in done.stdout
    assert theirs.read_text() == "#!/bin/sh\nexit 0\n" and not (theirs.parent / "pre-push").exists()


async def test_an_edit_of_a_file_another_agent_leased_is_refused_and_the_sessions_own_pass(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path, checkout: Path
) -> None:
    names = ProjectNames(project_id)
    config = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["loom"]
    env = host_env(nats_server.url, project_id, tmp_path)
    book = LeaseBook(nc, names)
    theirs = await book.acquire(
        OTHER,
        ["src/app.py"],
        handle="other-agent",
        reason="refactoring",
        work_id="c" * 32,
        branch="loom/x-cccc",
    )
    await book.stop()
    # the session's Warp is the folder's second instance: its id is not the one the
    # environment gives the hooks, so they find it only through the note it left
    second = {"LOOM_INSTANCE": "1"}
    async with started_server(
        config, env, checkout, tmp_path / "warp.err", "CLAUDE_PLUGIN_ROOT", second
    ) as session:
        me = await call(session, "warp_registry_register", {"capabilities": ["code"]})
        assert me["instance"] == 1
        await call(session, "warp_lease_acquire", {"patterns": ["src/other.py"], "reason": "mine"})

        def edit(tool: str, **tool_input: str) -> subprocess.CompletedProcess[str]:
            payload = {
                "session_id": "s1",
                "cwd": str(checkout),
                "hook_event_name": "PreToolUse",
                "tool_name": tool,
                "tool_input": tool_input,
                "tool_use_id": "toolu_1",
            }
            return run_hook("PreToolUse", env, payload)

        refused = edit("Edit", file_path=str(checkout / "src" / "app.py"), old_string="1", new_string="2")
        assert refused.returncode == 2 and refused.stdout == ""
        said = refused.stderr
        assert said.startswith("Loom refused this edit: src/app.py is leased exclusively by other-agent")
        assert f"work {'c' * 32}" in said and "branch loom/x-cccc" in said and f"lease {theirs.id}" in said
        assert "refactoring" in said

        own = edit("Write", file_path=str(checkout / "src" / "other.py"), content="y = 3\n")
        assert (own.returncode, own.stdout, own.stderr) == (0, "", "")  # the session's own lease
        free = edit("Write", file_path=str(checkout / "new" / "file.py"), content="")
        assert (free.returncode, free.stderr) == (0, "")
        notebook = edit("NotebookEdit", notebook_path=str(checkout / "src" / "app.py"), new_source="")
        assert notebook.returncode == 2
        outside = edit("Write", file_path=str(tmp_path / "elsewhere.txt"), content="")
        assert outside.returncode == 0  # outside the project: no lease can name it


def test_leases_out_of_reach_warn_or_refuse_when_strict(
    project_id: str, tmp_path: Path, checkout: Path
) -> None:
    env = host_env(f"nats://127.0.0.1:{free_port()}", project_id, tmp_path)
    payload = {
        "hook_event_name": "PreToolUse",
        "cwd": str(checkout),
        "tool_name": "Write",
        "tool_input": {"file_path": str(checkout / "README.md"), "content": ""},
    }
    lenient = run_hook("PreToolUse", env, payload)
    assert lenient.returncode == 0 and "leases could not be checked" in lenient.stderr
    strict = run_hook("PreToolUse", {**env, "LOOM_GUARD_STRICT": "1"}, payload)
    assert strict.returncode == 2 and "the edit is refused (LOOM_GUARD_STRICT=1)" in strict.stderr


@pytest.mark.parametrize(
    ("stdin", "says"),
    [
        ("not json", "stdin: must be one JSON object"),
        ("[1, 2]", "stdin: must be one JSON object"),
        ('{"tool_input": "x"}', "tool_input: must be an object"),
        ('{"tool_input": {"file_path": 7}}', "tool_input.file_path: must be a non-empty path"),
        ('{"cwd": 3, "tool_input": {"file_path": "a"}}', "cwd: must be a string"),
    ],
)
def test_bad_hook_input_names_the_field_and_blocks_nothing(
    project_id: str, tmp_path: Path, stdin: str, says: str
) -> None:
    env = host_env("nats://127.0.0.1:1", project_id, tmp_path)
    (group,) = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"]
    done = subprocess.run(
        ["sh", "-c", expand(group["hooks"][0]["command"])],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and says in done.stderr  # a non-blocking error: shown to the person
    assert "7" not in done.stderr.replace("loom-hook", "")


@pytest.mark.parametrize("how", ["PATH", "LOOM_HOME"])
def test_the_launcher_finds_loom_on_path_or_under_loom_home(
    project_id: str, tmp_path: Path, how: str
) -> None:
    env = host_env("nats://127.0.0.1:1", project_id, tmp_path)
    del env["LOOM_BIN"]
    if how == "PATH":
        env["PATH"] = f"{BIN}:/usr/bin:/bin"
    else:
        home = tmp_path / "loom-checkout"
        (home / ".venv").mkdir(parents=True)
        (home / ".venv" / "bin").symlink_to(BIN)
        env.update(LOOM_HOME=str(home), PATH="/usr/bin:/bin")
    done = subprocess.run(
        [str(PLUGIN / "bin" / "loom-launch"), "warp", "--version"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("warp "), done.stderr


def test_the_launcher_without_loom_fails_loudly_with_the_install_command(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(PLUGIN / "bin" / "loom-launch"), "warp", "--with-memory"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 127 and done.stdout == ""
    assert "Loom is not installed here" in done.stderr and "    uv tool install loom-fabric\n" in done.stderr
    unknown = subprocess.run(
        [str(PLUGIN / "bin" / "loom-launch"), "rm"], env=env, capture_output=True, text=True
    )
    assert (
        unknown.returncode == 2 and "command: must be warp, loom-hook, pattern or loom-run" in unknown.stderr
    )


def test_a_bad_setting_is_named_once_and_blocks_nothing(project_id: str, tmp_path: Path) -> None:
    env = host_env("http://user:hunter2@example:4222", project_id, tmp_path)
    (group,) = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"]
    done = subprocess.run(
        ["sh", "-c", expand(group["hooks"][0]["command"])],
        input="{}",
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stderr.startswith("loom-hook: NATS_URL")
    assert "hunter2" not in done.stderr and done.stdout == ""
