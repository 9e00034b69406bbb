"""The README's five-minute walkthrough, followed literally on a fresh data folder.

Each block of the walkthrough is taken from README.md as written and run in order, with
the substitutions of test_doc_examples.py (ports and paths: Weft's and NATS's ports are
free ones, passed as ``WEFT_PORT``/``WEFT_NATS_PORT`` and to Shuttle as ``LOOM_API_URL``;
``.venv/bin/`` is this Python's scripts folder; HOME is a fresh folder, so the data lands
in a fresh ``~/.local/share/loom``). Step 1's ``make run`` runs the Makefile's recipe for
``run`` (checked to be ``weft serve``). Step 3's plugin install is run by Claude Code's own
CLI (``claude plugin marketplace add`` and ``install``, the pinned package of
tests/plugins/hosts), and the installed plugin's server started as Claude Code starts it;
the rest of Claude Code's part is played by this test: an MCP client that runs Warp
exactly as the ``.mcp.json`` snippet says and does what the README says the agent does
(register, claim, report, complete).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from doc_examples import REPO, Block, Run, all_blocks, classify
from fabric import BIN, Fabric, base_environment, running_weft
from mcp_client import call, mcp_session
from transcript import commands, run_shell

from weft.demo import processes_with

SECTION = "Five-minute walkthrough"
IDLE_S = 10
"""The idle timeout the walkthrough's target sets and its text promises."""


def walkthrough() -> list[Block]:
    blocks = [b for b in all_blocks() if b.path == "README.md" and b.heading == SECTION]
    found, _ = classify(blocks)
    assert all(found.get(b) == Run("walkthrough") for b in blocks), "walkthrough blocks must be run here"
    others = [b for b, e in classify(all_blocks())[0].items() if e == Run("walkthrough") and b not in blocks]
    assert not others, f"classified as walkthrough but not in it: {[b.where for b in others]}"
    return blocks


def make_recipe(target: str) -> list[str]:
    """The recipe lines of a Makefile target."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"{target}:") and "=" not in line))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def shell(fabric: Fabric, command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_shell(fabric.substitute(command), env, REPO)


def argv(command: str) -> list[str]:
    return shlex.split(command.replace("\\\n", " "))


def fleet(fabric: Fabric, env: dict[str, str]) -> dict[str, Any]:
    result = run_shell(f"{BIN}/shuttle fleet --json", env, REPO)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


async def test_the_readme_walkthrough_as_written(tmp_path: Path) -> None:
    step1, step2, plugin, step3, step4 = walkthrough()
    home = tmp_path / "home"

    # 1. make run (its recipe is `weft serve`), in this folder
    assert step1.text.strip() == "make run"
    assert make_recipe("run") == ["$(BIN)/weft serve"]
    with running_weft(home, ["serve"], cwd=REPO) as fabric:
        banner = fabric.banner()
        data = home / ".local" / "share" / "loom"
        assert f"(embedded; data in {data}/nats/jetstream)" in banner
        assert (data / "nats" / "jetstream").is_dir()
        project = re.search(r"^  Project     (\S+)$", banner, re.M)
        assert project is not None, banner
        env = {**base_environment(home), "LOOM_API_URL": fabric.url}

        # the banner names step 2: the same commands, with this installation's paths
        shown = [c.line for c in commands(step2.text)][:2]
        printed = banner.split("No AI agent at hand?")[1].split("(README.md")[0]
        printed_commands = [c for c in printed.replace("\\\n", " ").splitlines()[1:] if c.strip()]
        assert [argv(fabric.substitute(c)) for c in shown] == [
            [a for a in argv(c) if a not in ("--api-url", fabric.url)]  # the banner names Weft's URL
            for c in printed_commands
        ]

        # 2. the loop closes without an AI agent, within the time the command allows
        cmds = commands(step2.text)
        assert [argv(c.line)[1:3] for c in cmds] == [
            ["targets", "add"], ["submit", "Count the errors in the sample log"], ["work", "list"], ["fleet"]
        ]  # fmt: skip
        added = shell(fabric, cmds[0].line, env)
        assert added.returncode == 0 and "added target demo" in added.stdout, added.stderr
        submitted = await asyncio.to_thread(shell, fabric, cmds[1].line, env)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert (
            "work.completed" in submitted.stdout and "Count the errors in the sample log" in submitted.stdout
        )
        listed = shell(fabric, cmds[2].line, env)
        assert listed.returncode == 0
        row = next(line for line in listed.stdout.splitlines() if "completed" in line)
        assert "Count the errors in the sample log" in row
        shown_fleet = shell(fabric, cmds[3].line, env)
        assert shown_fleet.returncode == 0 and "demo" in shown_fleet.stdout
        assert "Count the errors in the sample log" in shown_fleet.stdout  # recent work
        # `make run`'s terminal told it as it happened: the start (and where the agent's output
        # goes), the agent joining, the completion; no line per WebSocket connection
        told = fabric.banner()
        started = re.search(r"starting an agent on target demo; its output: (\S+)", told)
        assert started is not None, told[-3000:]
        assert await asyncio.to_thread(os.path.isfile, started.group(1))
        assert "joined (target demo)" in told and "(Count the errors in the sample log) completed" in told
        assert "connection open" not in told

        # ... and IDLE_S seconds after its last item the agent is shut down
        readme = " ".join((REPO / "README.md").read_text().split())
        assert f"--idle-timeout {IDLE_S}" in step2.text
        assert "Ten seconds after its last item Weft shuts the idle agent down" in readme
        deadline = time.monotonic() + IDLE_S + 60
        while True:
            doc = fleet(fabric, env)
            spinups = doc["stats"]["spinups"]["by_state"]
            if spinups.get("stopped") == 1 and all(a["status"] == "offline" for a in doc["agents"]):
                break
            assert time.monotonic() < deadline, f"the demo agent was not shut down: {spinups}"
            await asyncio.sleep(0.5)
        assert len(doc["agents"]) == 1 and doc["stats"]["work"]["by_status"]["completed"] == 1
        left = [pid for pid in processes_with("HOME", str(home)) if pid != fabric.proc.pid]
        assert not left or all(_is_nats_server(pid) for pid in left), left

        # 3. the plugin, installed by Claude Code's CLI and started as Claude Code starts it
        await the_plugin_as_installed(plugin, home, fabric, project[1], tmp_path)

        # 3. (or) Warp, run as the .mcp.json snippet says (the placeholders are the banner's)
        snippet = json.loads(fabric.substitute(step3.text))["mcpServers"]["warp"]
        assert snippet["command"] == f"{BIN}/warp"
        server_env = {
            k: v.replace("<the project id from the banner>", project[1]) for k, v in snippet["env"].items()
        }
        assert server_env["NATS_URL"] == fabric.nats_url
        folder = tmp_path / "my-app"
        folder.mkdir()
        async with mcp_session(snippet["command"], {**base_environment(home), **server_env}, folder) as warp:
            entry = await call(warp, "warp_registry_register")
            assert entry["capabilities"] == ["code", "review"] and entry["project_id"] == project[1]

            # 4. the work waits for this agent, which claims, reports and completes it
            cmds = commands(step4.text)
            assert [argv(c.line)[1:3] for c in cmds] == [
                ["targets", "remove"], ["submit", "Fix the flaky test"], ["fleet"]
            ]  # fmt: skip
            removed = shell(fabric, cmds[0].line, env)
            assert removed.returncode == 0, removed.stderr
            waiting = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                fabric.substitute(cmds[1].line),
                env=env,
                cwd=REPO,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            assert waiting.stdout is not None
            before = b""
            while b"snapshot" not in before:  # --wait follows the item from here on
                line = await asyncio.wait_for(waiting.stdout.readline(), 60)
                assert line, (await waiting.communicate())[1].decode()
                before += line
            claimed: dict[str, Any] = await call(warp, "warp_work_claim")
            assert claimed["claimed"], claimed
            item = claimed["item"]
            assert item["description"] == "Fix the flaky test"
            await call(
                warp, "warp_work_progress", {"work_id": item["id"], "percent": 50, "note": "reproduced"}
            )
            await call(warp, "warp_work_complete", {"work_id": item["id"], "result": {"commit": "abc123"}})
            printed, errors = await asyncio.wait_for(waiting.communicate(), 60)
            out, err = (before + printed).decode(), errors.decode()
            assert waiting.returncode == 0, out + err
            assert "50% reproduced" in out and 'result: {"commit": "abc123"}' in out
            shown_fleet = shell(fabric, cmds[2].line, env)
            assert shown_fleet.returncode == 0 and entry["agent_id"] in shown_fleet.stdout


CLAUDE = REPO / "tests" / "plugins" / "hosts" / "node_modules" / ".bin" / "claude"


async def the_plugin_as_installed(
    block: Block, home: Path, fabric: Fabric, project_id: str, tmp: Path
) -> None:
    """README step 3's ``/plugin`` lines, run by Claude Code's CLI in the walkthrough's HOME
    (``/path/to/loom`` is this checkout); then the installed copy's MCP server, started the
    way Claude Code starts it (``${CLAUDE_PLUGIN_ROOT}`` is the install folder) with the
    settings the README gives (``LOOM_HOME``, and the env of ``.claude/settings.json``)."""
    lines = [line.strip() for line in block.text.strip().splitlines()]
    assert lines == ["/plugin marketplace add /path/to/loom", "/plugin install loom@loom"]
    readme = (REPO / "README.md").read_text()
    settings = re.search(r"`(\{\"env\": \{.*?\}\})`", readme)
    assert settings is not None and "LOOM_HOME=/path/to/loom" in readme
    session_env = json.loads(settings[1].replace("<the project id from the banner>", project_id))["env"]
    installed = REPO / "plugins" / "loom"  # without Node, Claude Code's CLI is not there: the source folder
    if shutil.which("npm") is not None:
        assert CLAUDE.exists(), (
            "Claude Code is missing: `make test` installs it (npm ci in tests/plugins/hosts)"
        )
        cli_env = {
            **base_environment(home),
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        for line in lines:
            words = line.removeprefix("/").replace("/path/to/loom", str(REPO)).split()
            done = await asyncio.to_thread(
                subprocess.run,
                [str(CLAUDE), *words],
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
        record = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
        installed = Path(record["plugins"]["loom@loom"][0]["installPath"])
    server = json.loads((installed / ".mcp.json").read_text())["mcpServers"]["loom"]
    root = str(installed)
    command = server["command"].replace("${CLAUDE_PLUGIN_ROOT}", root)
    args = [a.replace("${CLAUDE_PLUGIN_ROOT}", root) for a in server["args"]]
    env = {
        **base_environment(home),
        **session_env,
        "NATS_URL": fabric.nats_url,  # the README's default port, substituted as everywhere here
        "LOOM_HOME": str(REPO),
        "CLAUDE_PLUGIN_ROOT": root,
    }
    folder = tmp / "plugin-session"
    folder.mkdir()
    async with mcp_session(command, env, folder, args=args) as warp:
        entry = await call(warp, "warp_registry_register")
        assert entry["capabilities"] == ["code", "review"] and entry["project_id"] == project_id
        assert "pattern_core_memory" in {t.name for t in (await warp.list_tools()).tools}
        await call(warp, "warp_registry_deregister")


def _is_nats_server(pid: int) -> bool:
    """Weft's own nats-server (stopped with Weft) is not an agent left behind."""
    try:
        return "nats-server" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
