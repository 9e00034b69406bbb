"""``local``: run the agent as a child process of Weft (no shell).

The agent gets its own session and process group, so stopping it reaches any
helpers it started (an MCP server, a tool) too: SIGTERM to the group, then
SIGKILL after the grace period. Output goes to log files, whose stderr tail
explains an agent that died during start-up.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
from collections import deque
from pathlib import Path
from typing import IO, Any

from pydantic import Field, field_validator

from shared.settings import LoomSettings
from weft.spinup.config import (
    MechanismConfig,
    argv,
)
from weft.spinup.mechanisms.base import (
    HandleCallback,
    Launch,
    Mechanism,
    MechanismError,
    ProbeResult,
    Stopwatch,
)


class LocalConfig(MechanismConfig):
    command: list[str]
    """Program and arguments, run directly (no shell)."""
    cwd: str | None = None
    inherit_env: bool = True
    """Pass Weft's own environment (PATH, HOME, ...) to the agent, minus NATS credentials."""
    startup_check_s: float = Field(default=2.0, ge=0, le=60)
    """An agent that exits within this window is a failed start (with its exit code and stderr)."""
    stop_grace_s: float = Field(default=10.0, ge=0, le=600)
    log_dir: str | None = None
    """Where the agent's stdout/stderr go (default: Loom's data directory)."""

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, v: Any) -> list[str]:
        return argv(v)

    @field_validator("cwd", "log_dir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError("must be an absolute path")
        return v


STDERR_TAIL_LINES = 10
_POLL_S = 0.05


def _proc_start_ticks(pid: int) -> str:
    """Start time of ``pid`` in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] == "Z"


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        with path.open("r", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return ""


def _open_logs(log_dir: Path, spinup_id: str) -> tuple[Path, Path, IO[bytes], IO[bytes]]:
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{spinup_id}.out", log_dir / f"{spinup_id}.err"
    return out_path, err_path, out_path.open("ab"), err_path.open("ab")


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


def resolve_program(program: str, path: str | None) -> str | None:
    """The executable ``program`` names, or None when there is none."""
    if "/" in program:
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    return shutil.which(program, path=path)


class LocalMechanism(Mechanism):
    name = "local"
    config_model = LocalConfig
    alive_check_interval_s = 0.0

    @classmethod
    def create(cls, log_root: Path | None = None) -> LocalMechanism:
        return cls(log_root)

    def __init__(self, log_root: Path | None = None) -> None:
        self._log_root = log_root
        self._children: dict[int, asyncio.subprocess.Process] = {}
        self._exit_codes: dict[int, int] = {}

    def _log_dir(self, config: LocalConfig, project_id: str) -> Path:
        if config.log_dir:
            return Path(config.log_dir)
        # Weft's start-up passes the root (weft.spinup.default_service); a spin-up built
        # without one (a test's) finds the data home the same way.
        return (self._log_root or LoomSettings().data_home / "spinup-logs") / project_id

    def _env(self, config: LocalConfig, launch: Launch) -> dict[str, str]:
        env = dict(os.environ) if config.inherit_env else {"PATH": os.environ.get("PATH", os.defpath)}
        env.update(config.env)
        env.update(launch.env())
        return env

    async def start(self, config: Any, launch: Launch, on_handle: HandleCallback) -> dict[str, str]:
        assert isinstance(config, LocalConfig)
        env = self._env(config, launch)
        program = resolve_program(config.command[0], env.get("PATH"))
        if program is None:
            raise MechanismError(f"config.command: {config.command[0]!r} is not an executable program")
        if config.cwd and not _is_dir(config.cwd):
            raise MechanismError(f"config.cwd: {config.cwd} is not a directory")
        out_path, err_path, out, err = _open_logs(self._log_dir(config, launch.project_id), launch.spinup_id)
        try:
            proc = await asyncio.create_subprocess_exec(
                program,
                *config.command[1:],
                cwd=config.cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            raise MechanismError(
                f"config.command: cannot start {config.command[0]!r}: {exc.strerror}"
            ) from None
        finally:
            out.close()
            err.close()
        self._children[proc.pid] = proc
        handle = {
            "pid": str(proc.pid),
            "host": socket.gethostname(),
            "proc_start": _proc_start_ticks(proc.pid),
            "stdout_log": str(out_path),
            "stderr_log": str(err_path),
        }
        await on_handle(handle)
        if config.startup_check_s > 0:
            try:
                code = await asyncio.wait_for(proc.wait(), config.startup_check_s)
            except TimeoutError:
                return handle
            self._forget(proc.pid, code)
            raise MechanismError(
                f"the agent exited with code {code} within {config.startup_check_s:g}s of starting"
                + self._stderr_note(err_path)
            )
        return handle

    def _forget(self, pid: int, code: int | None) -> None:
        self._children.pop(pid, None)
        if code is not None:
            self._exit_codes[pid] = code

    @staticmethod
    def _stderr_note(err_path: Path) -> str:
        tail = _tail(err_path)
        return f"; last stderr lines:\n{tail}" if tail else "; it wrote nothing to stderr"

    def _check_host(self, handle: dict[str, str]) -> None:
        host = handle.get("host")
        if host and host != socket.gethostname():
            raise MechanismError(f"the agent runs on host {host}; only the Weft on that host can stop it")

    def _same_process(self, pid: int, handle: dict[str, str]) -> bool:
        """Is ``pid`` still the process we started (and not gone or a reused pid)?"""
        child = self._children.get(pid)
        if child is not None:
            if child.returncode is None:
                return True
            self._forget(pid, child.returncode)
            return False
        if _is_zombie(pid):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        expected = handle.get("proc_start")
        return not expected or _proc_start_ticks(pid) == expected

    async def _wait_gone(self, pid: int, handle: dict[str, str], timeout: float) -> bool:
        child = self._children.get(pid)
        if child is not None:
            try:
                code = await asyncio.wait_for(child.wait(), timeout)
            except TimeoutError:
                return False
            self._forget(pid, code)
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._same_process(pid, handle):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL_S)
        return True

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> bool:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return False
        return True

    async def stop(self, config: Any, handle: dict[str, str]) -> str:
        assert isinstance(config, LocalConfig)
        pid = int(handle["pid"])
        self._check_host(handle)
        if not self._same_process(pid, handle):
            self._signal_group(pid, signal.SIGKILL)  # leftovers of the group, if any
            return "the agent process had already exited"
        self._signal_group(pid, signal.SIGTERM)
        if await self._wait_gone(pid, handle, config.stop_grace_s):
            note = "stopped with SIGTERM"
        else:
            self._signal_group(pid, signal.SIGKILL)
            if not await self._wait_gone(pid, handle, 5.0):
                raise MechanismError(f"process {pid} survived SIGKILL")
            note = f"killed with SIGKILL after {config.stop_grace_s:g}s"
        self._signal_group(pid, signal.SIGKILL)  # helpers the agent left behind in its group
        return note

    async def alive(self, config: Any, handle: dict[str, str]) -> bool | None:
        if handle.get("host") and handle["host"] != socket.gethostname():
            return None
        return self._same_process(int(handle["pid"]), handle)

    def exit_note(self, handle: dict[str, str]) -> str:
        """Why an agent that is gone before registering went: exit code and stderr tail."""
        pid = int(handle.get("pid", "0"))
        code = self._exit_codes.get(pid)
        note = f"the agent exited with code {code}" if code is not None else "the agent exited"
        err = handle.get("stderr_log")
        return note + " before registering" + (self._stderr_note(Path(err)) if err else "")

    async def probe(self, config: Any, timeout_s: float) -> ProbeResult:
        assert isinstance(config, LocalConfig)
        watch = Stopwatch()
        path = dict(os.environ, **config.env).get("PATH") if config.inherit_env else os.environ.get("PATH")
        program = resolve_program(config.command[0], path)
        if program is None:
            return ProbeResult(False, f"{config.command[0]!r} is not an executable program", watch.ms)
        if config.cwd and not _is_dir(config.cwd):
            return ProbeResult(False, f"working directory {config.cwd} does not exist", watch.ms)
        return ProbeResult(True, f"{program} is executable", watch.ms)
