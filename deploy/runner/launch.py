"""What the agent is given: an MCP configuration that starts Warp with the
fabric's credentials, a prompt, and a command line.

NATS credentials go only into Warp's environment (through the MCP config file,
mode 0600, deleted when the run ends), not into the agent CLI's environment, so
a shell command the agent runs does not find them in its env.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deploy.runner.config import RUNNER_VARIABLES, ConfigError, RunnerConfig
from shared.settings import IdentitySettings, NatsSettings

MCP_SERVER_NAME = "warp"
_WARP_PREFIXES = ("LOOM_", "LOOMINAL_")
_WARP_NAMES = ("MCP_PROJECT_PATH",)


def settings_variables(settings: type[NatsSettings] | type[IdentitySettings]) -> list[str]:
    """Every environment variable name (aliases included) a settings class reads."""
    found: list[str] = []
    for field in settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, str):
            found.append(alias)
        elif alias is not None:
            found.extend(str(choice) for choice in getattr(alias, "choices", []) if isinstance(choice, str))
    return found


NATS_VARIABLES = settings_variables(NatsSettings)
IDENTITY_VARIABLES = settings_variables(IdentitySettings)


def warp_environment(config: RunnerConfig, env: Mapping[str, str]) -> dict[str, str]:
    """Warp's environment: the NATS settings that are set, every LOOM_* setting the
    operator gave (identity, boundaries, heartbeat, replicas, ...) except the runner's
    own, and this agent's identity. Warp registers itself at start (LOOM_AUTO_REGISTER),
    carrying the spin-up id, which is how Weft sees that the agent it started has joined."""
    result = {name: env[name] for name in NATS_VARIABLES if env.get(name)}
    result.update(
        {
            k: v
            for k, v in env.items()
            if (k.startswith(_WARP_PREFIXES) or k in _WARP_NAMES) and k not in RUNNER_VARIABLES and v
        }
    )
    result.update(
        {
            "NATS_URL": config.nats_url,
            "LOOM_PROJECT_ID": config.project_id,
            "LOOM_AGENT_ID": config.agent_id,
            "LOOM_AGENT_TYPE": config.agent_type,
            "LOOM_HANDLE": env.get("LOOM_HANDLE") or handle_for(config),
            "LOOM_CAPABILITIES": ",".join(config.capabilities),
            "LOOM_SPINUP_ID": config.spinup_id,
            "LOOM_AUTO_REGISTER": "1",
        }
    )
    if config.work_id:
        result["LOOM_WORK_ID"] = config.work_id
    if config.target_id:
        result["LOOM_TARGET_ID"] = config.target_id
    return result


def check_warp_environment(environment: Mapping[str, str]) -> None:
    """Validate Warp's settings with Warp's own loader, so a bad value stops the run
    here, with the variable named, instead of inside the agent."""
    from warp.settings import WarpSettingsError, load_warp_settings

    try:
        load_warp_settings(environment)
    except WarpSettingsError as exc:
        raise ConfigError(str(exc)) from None


def handle_for(config: RunnerConfig) -> str:
    """A readable handle that tells operators which run this agent is."""
    tail = "".join(c for c in config.correlation_id.lower() if c.isalnum())[-12:] or "run"
    return f"{config.agent_type.replace('_', '-')}-{tail}"[:64].strip("-")


def mcp_config(config: RunnerConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """The ``mcpServers`` document Claude Code (``--mcp-config``) and most MCP clients read."""
    command, *args = config.warp_command
    return {
        "mcpServers": {
            MCP_SERVER_NAME: {
                "type": "stdio",
                "command": command,
                "args": args,
                "env": warp_environment(config, env),
            }
        }
    }


def prompt(config: RunnerConfig) -> str:
    started_for = f" for work item {config.work_id}" if config.work_id else ""
    return (
        f"You were started by the Loom fabric{started_for} (project '{config.project_id}', "
        f"run {config.correlation_id}). You are already registered in the fabric with the "
        f"capabilities {', '.join(config.capabilities)}.\n"
        "Use the tools of the 'warp' MCP server:\n"
        "1. warp_work_claim: take the next work item; it returns the task description. If nothing\n"
        "   is queued for you, stop here.\n"
        "2. Do the task. Report progress with warp_work_progress now and then; it keeps your claim.\n"
        "3. Finish with warp_work_complete (a short summary of the result), or warp_work_fail with the\n"
        "   reason if you cannot do it. Never leave a claimed item unfinished.\n"
        "4. warp_registry_deregister, then stop.\n"
    )


def agent_environment(
    config: RunnerConfig, env: Mapping[str, str], files: Mapping[str, Path]
) -> dict[str, str]:
    """The agent CLI's environment: the runner's, minus NATS credentials, plus pointers."""
    result = {k: v for k, v in env.items() if not k.startswith("NATS_")}
    result.pop("AGENT_API_KEY", None)
    if config.api_key:
        result[config.api_key_env] = config.api_key
    result.update(
        {
            "LOOM_MCP_CONFIG": str(files["mcp_config"]),
            "LOOM_PROMPT_FILE": str(files["prompt_file"]),
            "LOOM_WORK_ID": config.work_id or "",
            "LOOM_CAPABILITIES": ",".join(config.capabilities),
            "LOOM_CORRELATION_ID": config.correlation_id,
            "LOOM_PROJECT_ID": config.project_id,
            "LOOM_AGENT_ID": config.agent_id,
        }
    )
    return result


def write_files(config: RunnerConfig, env: Mapping[str, str], folder: Path) -> dict[str, Path]:
    """Write the MCP config (0600: it holds NATS credentials) and the prompt into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    config_path = folder / "mcp.json"
    fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(mcp_config(config, env), handle, indent=2)
    prompt_path = folder / "prompt.txt"
    prompt_path.write_text(prompt(config), encoding="utf-8")
    return {"mcp_config": config_path, "prompt_file": prompt_path}


def command_line(config: RunnerConfig, files: Mapping[str, Path]) -> list[str]:
    """AGENT_COMMAND split into words (no shell), each word's placeholders filled in."""
    values = {
        "mcp_config": str(files["mcp_config"]),
        "prompt_file": str(files["prompt_file"]),
        "prompt": prompt(config),
        "work_id": config.work_id or "",
        "capabilities": ",".join(config.capabilities),
        "correlation_id": config.correlation_id,
        "agent_id": config.agent_id,
        "project_id": config.project_id,
    }
    return [word.format(**values) for word in shlex.split(config.agent_command)]
