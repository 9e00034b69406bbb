"""``ssh``: start the agent on another machine over SSH (asyncssh).

The host key is always checked unless the target says otherwise: against a
``known_hosts`` file or a pinned key (strict, the default), trust on first use
recorded in ``known_hosts`` (``accept-new``), or not at all (``insecure``,
only when configured). The agent's environment travels in a script on the
channel's stdin, never on a command line (where ``ps`` would show the NATS
URL). The agent runs detached (``setsid nohup``) in its own process group,
and its pid is the handle; stopping it sends TERM to the group, then KILL.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import socket
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from weft.spinup.config import (
    MechanismConfig,
    argv,
    secret_env_name,
)
from weft.spinup.mechanisms.base import (
    HandleCallback,
    Launch,
    Mechanism,
    MechanismError,
    ProbeResult,
    Stopwatch,
    secret_from_env,
)

if TYPE_CHECKING:
    import asyncssh  # imported where a target is used: 0.14 s of every Weft's start otherwise


class SshConfig(MechanismConfig):
    host: str = Field(min_length=1, max_length=255)
    port: int = Field(default=22, ge=1, le=65535)
    username: str = Field(min_length=1, max_length=64)
    command: list[str]
    """Remote program and arguments; each is shell-quoted on the remote side."""
    cwd: str | None = None
    key_file: str | None = None
    key_passphrase_env: str | None = None
    use_agent: bool = False
    """Authenticate with the keys of the local ssh-agent (``SSH_AUTH_SOCK``)."""
    host_key_policy: Literal["strict", "accept-new", "insecure"] = "strict"
    """strict: the host key must be in ``known_hosts`` or equal ``host_key``;
    accept-new: trust a host seen for the first time and record it in ``known_hosts``;
    insecure: no host-key check at all (only when you mean it)."""
    known_hosts: str | None = None
    host_key: str | None = None
    """A pinned public key (``ssh-ed25519 AAAA...``)."""
    connect_timeout_s: float = Field(default=10.0, gt=0, le=300)
    startup_check_s: float = Field(default=2.0, ge=0, le=60)
    stop_grace_s: float = Field(default=10.0, ge=0, le=600)
    log_file: str = "/tmp/loom-agent-{spinup_id}.log"
    """Remote file for the agent's output (``{spinup_id}`` is replaced)."""

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, v: Any) -> list[str]:
        return argv(v)

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if any(c.isspace() for c in v) or v.startswith("-"):
            raise ValueError("must be a host name or address")
        return v

    @field_validator("username")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", v):
            raise ValueError("must be a user name (letters, digits, '_', '.', '-')")
        return v

    @field_validator("key_passphrase_env")
    @classmethod
    def _passphrase_env(cls, v: str | None) -> str | None:
        return secret_env_name(v)

    @field_validator("host_key")
    @classmethod
    def _host_key(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = v.split()
        if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
            raise ValueError("must be a public key line such as 'ssh-ed25519 AAAA...'")
        return " ".join(parts[:2])

    @field_validator("log_file")
    @classmethod
    def _log_file(cls, v: str) -> str:
        if not PurePosixPath(v).is_absolute():
            raise ValueError("must be an absolute remote path")
        return v

    @model_validator(mode="after")
    def _auth_and_trust(self) -> SshConfig:
        if not self.key_file and not self.use_agent:
            raise ValueError("key_file: give a private key file, or set use_agent: true")
        if self.host_key_policy == "strict" and not (self.known_hosts or self.host_key):
            raise ValueError(
                "known_hosts: the strict host-key policy needs a known_hosts file or a pinned host_key "
                "(or set host_key_policy: accept-new / insecure explicitly)"
            )
        if self.host_key_policy == "accept-new" and not self.known_hosts:
            raise ValueError("known_hosts: accept-new records new host keys and needs a known_hosts file")
        return self


LOG_TAIL_LINES = 10


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _known_hosts_pattern(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _trusted_keys_in(path: str, host: str, port: int) -> list[Any]:
    """Host keys ``known_hosts`` trusts for this host (empty: the host is unknown there)."""
    import asyncssh

    if not os.path.exists(path):
        return []
    try:
        known = asyncssh.read_known_hosts(path)
    except (OSError, ValueError) as exc:
        raise MechanismError(f"config.known_hosts: cannot read {path}: {exc}") from None
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        addr = host
    trusted = known.match(host, addr, port if port != 22 else None)
    return list(trusted[0]) + list(trusted[1])


def _append_known_host(path: str, host: str, port: int, key: Any) -> None:
    line = f"{_known_hosts_pattern(host, port)} {key.export_public_key('openssh').decode().strip()}\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(line)


def start_script(config: SshConfig, launch: Launch) -> str:
    """The POSIX sh script (sent on stdin) that starts the agent detached and prints its pid."""
    env = dict(config.env)
    env.update(launch.env())
    exports = "\n".join(f"export {name}={shlex.quote(value)}" for name, value in sorted(env.items()))
    command = " ".join(shlex.quote(arg) for arg in config.command)
    log_file = shlex.quote(config.log_file.replace("{spinup_id}", launch.spinup_id))
    cd = f"cd {shlex.quote(config.cwd)} || exit 97\n" if config.cwd else ""
    return (
        "set -u\n"
        "umask 077\n"
        f"{exports}\n"
        f"{cd}"
        f"if ! command -v {shlex.quote(config.command[0])} >/dev/null 2>&1; then\n"
        f"  echo 'loom: program not found: '{shlex.quote(config.command[0])} >&2; exit 127\n"
        "fi\n"
        "if command -v setsid >/dev/null 2>&1; then\n"
        f"  setsid nohup {command} >{log_file} 2>&1 </dev/null &\n"
        "else\n"
        f"  nohup {command} >{log_file} 2>&1 </dev/null &\n"
        "fi\n"
        "echo $!\n"
    )


ALIVE_FN = (
    "alive() {\n"
    '  kill -0 "$1" 2>/dev/null || return 1\n'
    '  case "$(ps -o stat= -p "$1" 2>/dev/null)" in Z*) return 1;; esac\n'
    "}\n"
)
"""Shell function: is the process there and not a zombie waiting to be reaped?"""


def check_script(pid: int, log_file: str) -> str:
    return (
        f"{ALIVE_FN}"
        f"if alive {pid}; then echo alive; else\n"
        f"  echo gone; tail -n {LOG_TAIL_LINES} {shlex.quote(log_file)} 2>/dev/null\n"
        "fi\n"
    )


def stop_script(pid: int, grace_s: float) -> str:
    """TERM to the agent's process group (or the process), wait, then KILL."""
    ticks = max(0, int(grace_s * 10))
    return (
        f"{ALIVE_FN}"
        f"pid={pid}\n"
        'if ! alive "$pid"; then echo gone; exit 0; fi\n'
        'kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null\n'
        "i=0\n"
        'while alive "$pid"; do\n'
        f"  if [ $i -ge {ticks} ]; then\n"
        '    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; echo killed; exit 0\n'
        "  fi\n"
        "  sleep 0.1; i=$((i+1))\n"
        "done\n"
        'kill -KILL -- "-$pid" 2>/dev/null\n'
        "echo stopped\n"
    )


class SshMechanism(Mechanism):
    name = "ssh"
    config_model = SshConfig

    async def _connect(self, config: SshConfig, timeout: float | None = None) -> asyncssh.SSHClientConnection:
        import asyncssh

        passphrase = (
            secret_from_env(config.key_passphrase_env, "key_passphrase_env")
            if config.key_passphrase_env
            else None
        )
        known_hosts: Any
        if config.host_key_policy == "insecure":
            known_hosts = None
        elif config.host_key:
            try:
                known_hosts = ([asyncssh.import_public_key(config.host_key)], [], [])
            except (asyncssh.KeyImportError, ValueError):
                raise MechanismError("config.host_key: not a public key asyncssh can read") from None
        else:
            assert config.known_hosts is not None
            if config.host_key_policy == "accept-new" and not _trusted_keys_in(
                config.known_hosts, config.host, config.port
            ):
                await self._record_new_host(config, timeout)
            elif not _exists(config.known_hosts):
                raise MechanismError(f"config.known_hosts: {config.known_hosts} does not exist")
            known_hosts = config.known_hosts
        if config.key_file and not _exists(config.key_file):
            raise MechanismError(f"config.key_file: {config.key_file} is not a file")
        try:
            return await asyncio.wait_for(
                asyncssh.connect(
                    config.host,
                    port=config.port,
                    username=config.username,
                    known_hosts=known_hosts,
                    client_keys=[config.key_file] if config.key_file else (),
                    passphrase=passphrase,
                    agent_path=() if config.use_agent else None,
                    config=None,
                    password_auth=False,
                    kbdint_auth=False,
                    gss_host=None,
                ),
                timeout or config.connect_timeout_s,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise MechanismError(
                f"ssh {config.host}:{config.port}: host key not trusted ({exc.reason}); add it to "
                "known_hosts or pin host_key (host_key_policy accept-new/insecure only if you mean it)"
            ) from None
        except asyncssh.PermissionDenied:
            raise MechanismError(
                f"ssh {config.username}@{config.host}:{config.port}: authentication failed"
            ) from None
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            raise MechanismError(f"ssh {config.host}:{config.port}: cannot connect: {reason}") from None
        except ValueError as exc:  # unreadable or encrypted key without passphrase
            raise MechanismError(f"config.key_file: cannot load the key: {exc}") from None

    async def _record_new_host(self, config: SshConfig, timeout: float | None) -> None:
        """accept-new: a host seen for the first time is trusted and recorded (never a changed key)."""
        import asyncssh

        assert config.known_hosts is not None
        try:
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(config.host, config.port),
                timeout or config.connect_timeout_s,
            )
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            raise MechanismError(
                f"ssh {config.host}:{config.port}: cannot fetch its host key: {exc}"
            ) from None
        if key is None:
            raise MechanismError(f"ssh {config.host}:{config.port}: the server sent no host key")
        _append_known_host(config.known_hosts, config.host, config.port, key)

    async def _run(
        self, conn: asyncssh.SSHClientConnection, script: str, timeout: float
    ) -> asyncssh.SSHCompletedProcess:
        import asyncssh

        try:
            return await asyncio.wait_for(conn.run("sh -s", input=script, check=False), timeout)
        except TimeoutError:
            raise MechanismError(f"the remote command did not finish within {timeout:g}s") from None
        except asyncssh.Error as exc:
            raise MechanismError(f"the remote command failed: {exc.reason}") from None

    async def start(self, config: Any, launch: Launch, on_handle: HandleCallback) -> dict[str, str]:
        assert isinstance(config, SshConfig)
        conn = await self._connect(config)
        async with conn:
            result = await self._run(conn, start_script(config, launch), config.connect_timeout_s + 30)
            out = str(result.stdout or "").strip()
            err = str(result.stderr or "").strip()
            if result.exit_status != 0 or not out.splitlines() or not out.splitlines()[-1].isdigit():
                why = {97: f"cannot change to {config.cwd}"}.get(result.exit_status or 0, err or out)
                raise MechanismError(
                    f"ssh {config.host}: starting the agent failed (exit {result.exit_status}): {why}"
                )
            pid = out.splitlines()[-1]
            log_file = config.log_file.replace("{spinup_id}", launch.spinup_id)
            handle = {"host": config.host, "port": str(config.port), "pid": pid, "log_file": log_file}
            await on_handle(handle)
            if config.startup_check_s > 0:
                await asyncio.sleep(config.startup_check_s)
                check = await self._run(conn, check_script(int(pid), log_file), config.connect_timeout_s)
                lines = str(check.stdout or "").splitlines()
                if lines and lines[0] == "gone":
                    tail = "\n".join(lines[1:]).strip()
                    raise MechanismError(
                        f"ssh {config.host}: the agent exited within {config.startup_check_s:g}s of starting"
                        + (f"; last output lines:\n{tail}" if tail else "")
                    )
        return handle

    async def stop(self, config: Any, handle: dict[str, str]) -> str:
        assert isinstance(config, SshConfig)
        pid = int(handle["pid"])
        conn = await self._connect(config)
        async with conn:
            result = await self._run(conn, stop_script(pid, config.stop_grace_s), config.stop_grace_s + 30)
        outcome = str(result.stdout or "").strip()
        return {
            "gone": "the remote agent had already exited",
            "stopped": f"remote process {pid} stopped with SIGTERM",
            "killed": f"remote process {pid} killed with SIGKILL after {config.stop_grace_s:g}s",
        }.get(outcome, f"remote stop answered {outcome!r}")

    async def probe(self, config: Any, timeout_s: float) -> ProbeResult:
        assert isinstance(config, SshConfig)
        watch = Stopwatch()
        try:
            conn = await self._connect(config, timeout_s)
            async with conn:
                result = await self._run(conn, "true\n", timeout_s)
        except MechanismError as exc:
            return ProbeResult(False, str(exc), watch.ms)
        if result.exit_status != 0:
            return ProbeResult(
                False, f"ssh {config.host}: a no-op command exited {result.exit_status}", watch.ms
            )
        return ProbeResult(True, f"ssh {config.username}@{config.host}:{config.port} ran a no-op", watch.ms)
