"""``ssh`` mechanism through a real SSH server (asyncssh, in-process, key auth, real shell)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from nats.aio.client import Client as NatsClient

from shared.models import SpinupState, Target, WorkStatus, WorkSubmission
from shared.names import ProjectNames
from tests.spinup.conftest import ROOT, demo_agent_command, eventually, read_text
from tests.spinup.sshd import SshServer, start_sshd
from testsupport.processes import pid_alive
from testsupport.work import work_queue
from weft.spinup.managed import ManagedSpinup
from weft.spinup.mechanisms import parse_config
from weft.spinup.mechanisms.base import Launch
from weft.spinup.mechanisms.ssh import SshMechanism

MakeTarget = Callable[..., Awaitable[Target]]


@pytest.fixture
async def sshd(tmp_path: Path) -> AsyncIterator[SshServer]:
    server = await start_sshd(tmp_path / "ssh")
    try:
        yield server
    finally:
        server.server.close()
        await server.server.wait_closed()


def ssh_config(sshd: SshServer, tmp_path: Path, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": sshd.port,
        "username": "loom",
        "key_file": str(sshd.client_key_file),
        "known_hosts": str(sshd.known_hosts_file),
        "command": demo_agent_command(),
        "cwd": str(ROOT),
        "env": {"LOOM_HEARTBEAT_S": "1"},
        "log_file": str(tmp_path / "remote-{spinup_id}.log"),
    }
    config.update(changes)
    return config


async def _state(engine: ManagedSpinup, project_id: str, spinup_id: str, *states: SpinupState) -> Any:
    record = await (await engine.manager(project_id)).store.get(spinup_id)
    return record if record.op.state in states else None


async def test_ssh_agent_joins_claims_completes_and_is_stopped_when_idle(
    service: ManagedSpinup,
    make_target: MakeTarget,
    sshd: SshServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
    tmp_path: Path,
) -> None:
    await make_target(name="remote", mechanism="ssh", config=ssh_config(sshd, tmp_path), idle_timeout_s=2)
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="over-ssh", description="d", capability="code"))
    decision = await service.request_for_work(project_id, item)
    assert decision.operation is not None, decision.detail
    op_id = decision.operation.id

    registered = await eventually(
        lambda: _state(service, project_id, op_id, SpinupState.REGISTERED, SpinupState.STOPPING),
        what="the remote agent to register",
    )
    remote_pid = int(registered.op.handle["pid"])
    assert registered.op.handle["host"] == "127.0.0.1" and pid_alive(remote_pid)

    async def completed() -> Any:
        current = await work.get(item.id)
        return current if current.status is WorkStatus.COMPLETED else None

    done = await eventually(completed, what="the remote agent to complete the work")
    assert done.assigned_to == registered.op.agent_id

    await eventually(lambda: _state(service, project_id, op_id, SpinupState.STOPPED), what="idle shutdown")
    assert not pid_alive(remote_pid)
    # the environment (NATS URL included) travelled on stdin, never on a command line
    assert set(sshd.commands) == {"sh -s"} and set(sshd.users) == {"loom"}


async def test_stop_kills_the_remote_process_it_started(sshd: SshServer, tmp_path: Path) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
        "time.sleep(600)"
    )
    config = parse_config(
        "ssh",
        ssh_config(
            sshd, tmp_path, command=[sys.executable, "-c", stubborn], stop_grace_s=0.3, startup_check_s=0.3
        ),
    )
    mechanism = SshMechanism()
    launch = Launch("a" * 32, "b" * 32, "p1", "c" * 32, "remote", "nats://127.0.0.1:4222")
    seen: list[dict[str, str]] = []

    async def on_handle(handle: dict[str, str]) -> None:
        seen.append(dict(handle))

    handle = await mechanism.start(config, launch, on_handle)
    pid = int(handle["pid"])
    assert seen and seen[0]["pid"] == handle["pid"] and pid_alive(pid)

    async def ignoring_sigterm() -> bool:
        return "ready" in read_text(Path(handle["log_file"]))

    await eventually(ignoring_sigterm, what="the remote process to ignore SIGTERM")
    note = await mechanism.stop(config, handle)
    assert note == f"remote process {pid} killed with SIGKILL after 0.3s"
    await eventually(lambda: _gone(pid), what="the remote process to be gone")
    assert await mechanism.stop(config, handle) == "the remote agent had already exited"


async def _gone(pid: int) -> bool:
    return not pid_alive(pid)


async def test_remote_agent_that_dies_at_start_is_a_failed_start_with_its_output(
    sshd: SshServer, tmp_path: Path
) -> None:
    # sh, not a Python: it dies in milliseconds even on a loaded machine, well inside the
    # 2 s start check (a Python's start-up took longer than that once under a full test run)
    script = "echo 'no credentials for the model' >&2; exit 4"
    config = parse_config("ssh", ssh_config(sshd, tmp_path, command=["sh", "-c", script]))
    launch = Launch("d" * 32, "e" * 32, "p1", "f" * 32, "remote", "nats://127.0.0.1:4222")

    async def ignore(_: dict[str, str]) -> None:
        return None

    with pytest.raises(Exception) as failure:
        await SshMechanism().start(config, launch, ignore)
    assert "exited within 2s" in str(failure.value)
    assert "no credentials for the model" in str(failure.value)


async def test_cwd_that_does_not_exist_is_reported(sshd: SshServer, tmp_path: Path) -> None:
    config = parse_config("ssh", ssh_config(sshd, tmp_path, cwd="/nonexistent/place"))
    launch = Launch("d" * 32, "e" * 32, "p1", "f" * 32, "remote", "nats://127.0.0.1:4222")

    async def ignore(_: dict[str, str]) -> None:
        return None

    with pytest.raises(Exception, match="cannot change to /nonexistent/place"):
        await SshMechanism().start(config, launch, ignore)


async def test_unknown_host_key_is_refused_unless_the_policy_allows_it(
    sshd: SshServer, tmp_path: Path
) -> None:
    mechanism = SshMechanism()
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")

    strict_wrong = parse_config("ssh", ssh_config(sshd, tmp_path, known_hosts=str(wrong)))
    result = await mechanism.probe(strict_wrong, 5)
    assert result.ok is False and "host key not trusted" in result.detail

    strict_unknown = parse_config("ssh", ssh_config(sshd, tmp_path, known_hosts=str(empty)))
    assert (await mechanism.probe(strict_unknown, 5)).ok is False

    pinned_wrong = parse_config("ssh", ssh_config(sshd, tmp_path, known_hosts=None, host_key=other))
    assert (await mechanism.probe(pinned_wrong, 5)).ok is False
    pinned_right = parse_config(
        "ssh", ssh_config(sshd, tmp_path, known_hosts=None, host_key=sshd.host_key_line)
    )
    assert (await mechanism.probe(pinned_right, 5)).ok is True

    accept_new = parse_config(
        "ssh", ssh_config(sshd, tmp_path, known_hosts=str(empty), host_key_policy="accept-new")
    )
    first = await mechanism.probe(accept_new, 5)
    assert first.ok is True and first.detail.endswith("ran a no-op")
    assert sshd.host_key_line in empty.read_text()  # recorded on first use
    # accept-new never accepts a *changed* key
    changed = parse_config(
        "ssh", ssh_config(sshd, tmp_path, known_hosts=str(wrong), host_key_policy="accept-new")
    )
    assert (await mechanism.probe(changed, 5)).ok is False

    insecure = parse_config("ssh", ssh_config(sshd, tmp_path, known_hosts=None, host_key_policy="insecure"))
    assert (await mechanism.probe(insecure, 5)).ok is True


async def test_wrong_client_key_is_an_authentication_failure(sshd: SshServer, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    config = parse_config("ssh", ssh_config(sshd, tmp_path, key_file=str(stranger)))
    result = await SshMechanism().probe(config, 5)
    assert result.ok is False and "authentication failed" in result.detail
