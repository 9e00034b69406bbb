"""A real SSH server for the tests: asyncssh in-process on a free port, public-key auth,
running each requested command through a real shell on this machine."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from shared.nats.server import free_port


@dataclass
class SshServer:
    port: int
    host_key: asyncssh.SSHKey
    client_key_file: Path
    known_hosts_file: Path
    commands: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    server: Any = None

    @property
    def host_key_line(self) -> str:
        return str(self.host_key.export_public_key("openssh").decode().strip())

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key_line}"


def _write_files(state: SshServer, client_key: asyncssh.SSHKey) -> None:
    state.client_key_file.parent.mkdir(parents=True, exist_ok=True)
    client_key.write_private_key(str(state.client_key_file))
    state.client_key_file.chmod(0o600)
    state.known_hosts_file.write_text(state.known_hosts_line() + "\n")


async def start_sshd(folder: Path) -> SshServer:
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    port = free_port()
    state = SshServer(
        port=port,
        host_key=host_key,
        client_key_file=folder / "id_ed25519",
        known_hosts_file=folder / "known_hosts",
    )
    _write_files(state, client_key)
    authorized = asyncssh.import_authorized_keys(client_key.export_public_key("openssh").decode())

    async def run(process: asyncssh.SSHServerProcess[str]) -> None:
        command = process.command or "sh"
        state.commands.append(command)
        state.users.append(process.get_extra_info("username"))
        script = await process.stdin.read()
        shell = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await shell.communicate(script.encode())
        process.stdout.write(out.decode())
        process.stderr.write(err.decode())
        process.exit(shell.returncode or 0)

    state.server = await asyncssh.create_server(
        asyncssh.SSHServer,
        "127.0.0.1",
        port,
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        process_factory=run,
    )
    return state
