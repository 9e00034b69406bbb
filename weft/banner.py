"""The start-up banner (stderr): where the API is, where NATS is, how to attach an agent."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

from shared.work.policy import BoundaryPolicy
from weft import __version__
from weft.settings import WeftSettings
from weft.state import NatsInfo


def warp_command() -> str:
    """Absolute path of the ``warp`` console script next to this interpreter, if installed."""
    beside = Path(sys.executable).parent / "warp"
    if beside.is_file():
        return str(beside)
    return shutil.which("warp") or "warp"


DEFAULT_API_URL = "http://127.0.0.1:8080"
ATTACHED_CAPABILITIES = "code,review"
"""What an agent attached from the banner may claim: the README's snippet gives the same
(an agent with no capabilities registers but claims nothing)."""
"""Where Shuttle looks for Weft unless told otherwise."""


def loom_python() -> str:
    """This installation's Python by the name a reader types (``.../bin/python``)."""
    beside = Path(sys.executable).parent / "python"
    return str(beside) if beside.is_file() else sys.executable


def demo_commands(api_url: str) -> list[str]:
    """The README walkthrough's no-AI step with this installation's paths: a target that
    runs the scripted demo agent, then work for it (tests keep the two the same)."""
    shuttle = [str(Path(sys.executable).parent / "shuttle")]
    if api_url != DEFAULT_API_URL:
        shuttle += ["--api-url", api_url]
    agent = shlex.join([loom_python(), "-m", "weft.spinup.demo_agent"])
    return [
        shlex.join([*shuttle, "targets", "add", "demo", "-m", "local", "-c", "code", "--idle-timeout", "10"])
        + " \\\n      --command "
        + shlex.quote(agent),
        shlex.join(
            [
                *shuttle,
                "submit",
                "Count the errors in the sample log",
                "-c",
                "code",
                "--wait",
                "--wait-timeout",
                "60",
            ]
        ),
    ]


def render_banner(settings: WeftSettings, nats: NatsInfo, policy: BoundaryPolicy | None) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    base = f"http://{host}:{settings.port}"
    project = settings.project_id
    warp = warp_command()
    nats_line = nats.url + (f"  (embedded; data in {nats.store_dir})" if nats.embedded else "")
    if nats.scoped:
        nats_line += "  [scoped: each agent needs its own credentials]"
    if settings.auth_enabled:
        auth = "bearer token required (WEFT_API_TOKENS)"
    elif settings.loopback_only:
        auth = "open (this machine only) - set WEFT_API_TOKENS to require a token"
    else:
        auth = "OPEN TO THE NETWORK (WEFT_ALLOW_OPEN_API) - anyone reaching this port can run commands here"
    policy_line = (
        f"{settings.policy_file} ({len(policy.boundaries)} boundary rules)"
        if policy is not None and settings.policy_file is not None
        else "none given - projects keep their published policy (default: any agent, any boundary)"
    )
    mcp_json = json.dumps(
        {
            "mcpServers": {
                "warp": {
                    "command": warp,
                    "env": {
                        "NATS_URL": nats.url,
                        "LOOM_PROJECT_ID": project,
                        "LOOM_CAPABILITIES": ATTACHED_CAPABILITIES,
                    },
                }
            }
        },
        indent=2,
    )
    console = "asks for one of the tokens" if settings.auth_enabled else "the fleet live in a browser"
    lines = [
        f"Weft {__version__} - Loom coordinator",
        f"  Console     {base}/   ({console})",
        f"  REST API    {base}/api",
        f"  API docs    {base}/docs   (OpenAPI: {base}/openapi.json)",
        f"  Events      ws://{host}:{settings.port}/api/ws",
        f"  Health      {base}/health   Metrics: {base}/metrics",
        f"  NATS        {nats_line}",
    ]
    if nats.websocket_url:
        lines.append(f"  NATS (WS)   {nats.websocket_url}")
    lines += [
        f"  Project     {project}",
        f"  Auth        {auth}",
        f"  Policy      {policy_line}",
        "",
    ]
    if nats.scoped:
        lines += [
            "Agents need credentials of their own (NATS runs with scoped auth):",
            "  shuttle agents credentials --out agent.creds",
            "  (then add -e NATS_CREDS=$PWD/agent.creds to the command below)",
        ]
    lines += [
        "Attach an agent: run Warp as an MCP server of your MCP client, e.g. Claude Code:",
        f"  claude mcp add warp -e NATS_URL={nats.url} -e LOOM_PROJECT_ID={project} "
        f"-e LOOM_CAPABILITIES={ATTACHED_CAPABILITIES} -- {warp}",
        "(LOOM_CAPABILITIES: the work it may claim; without any, it claims nothing)",
        "or add this to the client's MCP configuration (.mcp.json):",
        *("  " + line for line in mcp_json.splitlines()),
        "",
        "No AI agent at hand? See the loop close with a scripted one (in another terminal"
        + ("; LOOM_API_TOKEN set to one of the tokens" if settings.auth_enabled else "")
        + "):",
        *("  " + line for line in demo_commands(base)),
        "(README.md, Five-minute walkthrough; `make demo` does the same on a throw-away fabric)",
        "",
    ]
    return "\n".join(lines)


def print_banner(settings: WeftSettings, nats: NatsInfo, policy: BoundaryPolicy | None) -> None:
    print(render_banner(settings, nats, policy), file=sys.stderr, flush=True)
