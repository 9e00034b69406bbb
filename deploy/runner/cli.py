"""``python -m deploy.runner`` (what run-agent.sh and the agent image run).

``run`` (default): check NATS is reachable, write the MCP config and prompt,
start AGENT_COMMAND with a deadline, and report a failure as a work failure.
``report-failure --reason``: only the reporting part, for the workflow step that
runs after a cancelled or timed-out job.

Exit codes: 0 the agent succeeded; 1 the agent failed (reported to Loom);
2 bad configuration; 3 NATS unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from nats.aio.client import Client as NatsClient

from deploy.runner import launch
from deploy.runner.config import ConfigError, RunnerConfig, load
from deploy.runner.credentials import environment_with_credentials
from deploy.runner.process import run_agent
from deploy.runner.report import report_failure, unfinished_after_success, work_queue, work_status
from shared.names import ProjectNames
from shared.nats.client import NatsConnectError, connect
from shared.redact import configure_logging, redact, register_secret
from shared.settings import NatsSettings
from shared.work.rules import WorkError

log = logging.getLogger("loom.runner")

EXIT_OK, EXIT_AGENT_FAILED, EXIT_CONFIG, EXIT_NATS = 0, 1, 2, 3
CONNECT_TIMEOUT_S = 15.0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run-agent", description="Run a Loom agent for one work item.")
    p.add_argument("--allow-insecure", action="store_true", help="allow nats:// and ws:// (local testing)")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("run", help="start the agent and report its outcome (default)")
    fail = sub.add_parser("report-failure", help="fail the work the agent still holds")
    fail.add_argument("--reason", required=True, help="why the run failed (shown on the work item)")
    return p


def nats_settings(env: Mapping[str, str]) -> NatsSettings:
    """NATS settings from ``env`` only (not this process's environment)."""
    return NatsSettings.model_validate({name: env[name] for name in launch.NATS_VARIABLES if env.get(name)})


async def with_capabilities(nc: NatsClient, config: RunnerConfig) -> RunnerConfig:
    """Without LOOM_CAPABILITIES, the agent registers the capability of the work it was started for."""
    if config.capabilities:
        return config
    assert config.work_id is not None  # load() refuses neither capabilities nor work id
    try:
        item = await work_queue(nc, ProjectNames(config.project_id)).get(config.work_id)
    except WorkError:
        raise ConfigError(
            f"LOOM_CAPABILITIES: not given, and work item {config.work_id} does not exist in project "
            f"{config.project_id} to take its capability from"
        ) from None
    return replace(config, capabilities=(item.capability,))


async def run(config: RunnerConfig, env: Mapping[str, str]) -> int:
    nc = await connect(nats_settings(env), url=config.nats_url, name="loom-runner", timeout=CONNECT_TIMEOUT_S)
    try:
        config = await with_capabilities(nc, config)
        launch.check_warp_environment(launch.warp_environment(config, env))
        queue = work_queue(nc, ProjectNames(config.project_id))
        status = await work_status(queue, config.work_id)
        log.info(
            "run %s: starting the agent as %s with capabilities %s%s",
            config.correlation_id,
            config.agent_id,
            ",".join(config.capabilities),
            f"; work {config.work_id} is {status.value if status else 'unknown to this project'}"
            if config.work_id
            else "",
        )
        with tempfile.TemporaryDirectory(prefix="loom-agent-") as folder:
            files = launch.write_files(config, env, Path(folder))
            argv = launch.command_line(config, files)
            outcome = await run_agent(argv, launch.agent_environment(config, env, files), config.timeout_s)
        if outcome.ok:
            left = await unfinished_after_success(nc, config)
            if not left:
                final = await work_status(queue, config.work_id)
                log.info("agent finished%s", f"; work {config.work_id} is {final.value}" if final else "")
                return EXIT_OK
            reason = "the agent exited without completing or failing " + ", ".join(i.id for i in left)
        else:
            reason = outcome.describe()
        report = await report_failure(nc, config, reason)
        log.error(
            "run failed: %s; failed on the agent's behalf: %s", reason, ", ".join(report.failed) or "nothing"
        )
        return EXIT_AGENT_FAILED
    finally:
        await nc.close()


async def report_only(config: RunnerConfig, env: Mapping[str, str], reason: str) -> int:
    nc = await connect(nats_settings(env), url=config.nats_url, name="loom-runner", timeout=CONNECT_TIMEOUT_S)
    try:
        report = await report_failure(nc, config, reason)
    finally:
        await nc.close()
    log.info(
        "reported: failed %s%s",
        ", ".join(report.failed) or "nothing",
        f"; work {config.work_id} is {report.work_status.value}" if report.work_status else "",
    )
    return EXIT_OK


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    configure_logging()
    args = parser().parse_args(argv)
    environment = dict(os.environ if env is None else env)
    for secret in (
        environment.get("AGENT_API_KEY"),
        environment.get("NATS_PASS"),
        environment.get("NATS_TOKEN"),
    ):
        register_secret(secret)
    command = args.command or "run"
    try:
        environment = environment_with_credentials(environment)
        config = load(environment, allow_insecure=args.allow_insecure, need_agent=command == "run")
    except ConfigError as exc:
        print(f"run-agent: {redact(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        if command == "report-failure":
            return asyncio.run(report_only(config, environment, args.reason))
        return asyncio.run(run(config, environment))
    except ConfigError as exc:
        print(f"run-agent: {redact(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    except NatsConnectError as exc:
        print(f"run-agent: cannot reach NATS: {redact(exc)}", file=sys.stderr)
        return EXIT_NATS
