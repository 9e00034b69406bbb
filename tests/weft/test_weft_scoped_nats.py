"""Scoped NATS credentials (issue 24), against a real nats-server in operator mode started the
way ``weft serve`` starts it with ``WEFT_NATS_AUTH=scoped``: the server, not Loom's code,
refuses what an agent's credentials do not allow."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamConfig
from pydantic import SecretStr
from synadia_ai.agents import Agents
from test_weft_cli import clean_env, run, wait_healthy, weft_process

from shared.names import GLOBAL_REGISTRY_BUCKET, ProjectNames, agent_access, kv_stream
from shared.nats.auth import Issuer, Permissions, agent_of, parse_creds
from shared.nats.client import NatsConnectError, connect
from shared.nats.jetstream import ProvisionError, ensure_kv, ensure_stream
from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port
from shared.settings import NatsSettings
from testsupport.env import without_fabric
from testsupport.protocol import answers, next_prompt, protocol_agent
from testsupport.warp import WARP, Agent
from warp.messages import InboxService
from weft.runtime import NatsRuntime, open_nats
from weft.settings import WeftSettings

ADMIN = "admin-token"
ANSWER_S = 20.0
"""How long a provisioning request may wait for Weft's answer: a liveness bound (nats-py's own
default, 0.5 s, was once too short for a stream's creation on a loaded machine)."""


@dataclass
class Scoped:
    weft: Any
    runtime: NatsRuntime
    url: str

    async def mint(self, project: str, **body: Any) -> dict[str, Any]:
        async with self.weft.client(token=ADMIN, project=project) as api:
            response = await api.post("/api/agents/credentials", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())


@pytest.fixture
async def scoped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weft_factory: Any, project_id: str
) -> AsyncIterator[Scoped]:
    """A Weft with the bundled nats-server in scoped mode (keys and data under tmp_path)."""
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "data"))
    settings = WeftSettings(
        project_id=project_id, nats_auth="scoped", nats_port=-1, nats_ws_port=-1, nats_sync="1s"
    )
    runtime = await open_nats(settings)
    assert runtime.server is not None and runtime.authority is not None
    async with weft_factory(
        project_id=project_id, runtime=runtime, nats_auth="scoped", api_tokens=f"admin:{ADMIN}"
    ) as weft:
        yield Scoped(weft=weft, runtime=runtime, url=runtime.server.url)


class Watched:
    """A connection with an agent's credentials, keeping every asynchronous error the server sent."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.nc: NatsClient | None = None

    async def violation(self, fragment: str, timeout: float = 10) -> str:
        """Wait for the server's permissions violation naming ``fragment``."""
        async with asyncio.timeout(timeout):
            while True:
                for error in self.errors:
                    if "permissions violation" in error and fragment.lower() in error:
                        return error
                await asyncio.sleep(0.02)


@asynccontextmanager
async def as_agent(url: str, creds: str) -> AsyncIterator[tuple[NatsClient, Watched]]:
    watched = Watched()
    nc = await connect(NatsSettings(creds_content=SecretStr(creds)), url=url, name="agent-under-test")
    original = nc._error_cb

    async def keep(exc: Exception) -> None:
        watched.errors.append(str(exc).lower())
        if original is not None:
            await original(exc)

    nc._error_cb = keep
    watched.nc = nc
    try:
        yield nc, watched
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def refused(call: Callable[[], Any], watched: Watched, fragment: str) -> None:
    """``call`` (a request) gets no answer and the server reports a violation for ``fragment``."""
    with pytest.raises(Exception):  # noqa: B017 - nats-py raises its timeout error: no reply came
        await call()
    await watched.violation(fragment)


async def test_an_agent_reaches_only_its_project_its_inbox_and_its_own_keys(
    scoped: Scoped, project_id: str
) -> None:
    other_project = f"{project_id}-b"
    a = await scoped.mint(project_id)
    b = await scoped.mint(project_id)
    c = await scoped.mint(other_project)
    names, theirs = ProjectNames(project_id), ProjectNames(other_project)
    assert agent_of(parse_creds(a["creds"])[0]) is not None

    # Weft makes what the agents use (they ask through loom.<p>.provision)
    assert c["project_id"] == other_project
    weft_js = scoped.runtime.nc.jetstream()
    channel = theirs.channel_stream("roadmap")
    await ensure_stream(weft_js, StreamConfig(name=channel, subjects=[theirs.channel_subject("roadmap")]))
    async with as_agent(scoped.url, b["creds"]) as (bnc, _):
        inbox_b = InboxService(bnc, bnc.jetstream(timeout=5), names)
        await inbox_b.ensure_consumer(b["agent_id"])

    async with as_agent(scoped.url, a["creds"]) as (nc, watched):
        js = nc.jetstream(timeout=1)
        # its own project: fine
        inbox = InboxService(nc, js, names)
        sent = await inbox.send(
            sender_id=a["agent_id"], sender_handle="a", recipient_id=b["agent_id"], body="hi"
        )
        assert sent.seq >= 1
        # another project's subjects: neither subscribe nor read its streams
        await nc.subscribe(f"loom.{other_project}.>")
        await nc.flush()
        await watched.violation(f'subscription to "loom.{other_project}.>')
        await refused(lambda: js.stream_info(theirs.channel_stream("roadmap")), watched, "stream.info")
        # another agent's inbox: not its consumer, not the stream directly, not its replies
        await refused(
            lambda: js.add_consumer(
                names.inbox_stream,
                name=names.inbox_consumer(b["agent_id"]),
                durable_name=names.inbox_consumer(b["agent_id"]),
                filter_subject=names.inbox_subject(b["agent_id"]),
            ),
            watched,
            f"consumer.create.{names.inbox_stream}",
        )
        await refused(
            lambda: js.get_msg(names.inbox_stream, seq=sent.seq, direct=True), watched, "direct.get"
        )
        await refused(lambda: js.get_msg(names.inbox_stream, seq=sent.seq), watched, "msg.get")
        await nc.subscribe(f"_INBOX.{b['agent_id']}.>")
        await nc.subscribe(names.control_subject(b["agent_id"]))
        await nc.flush()
        await watched.violation(f'subscription to "_inbox.{b["agent_id"]}')
        await watched.violation(f'subscription to "{names.control_subject(b["agent_id"])}')
        # publish as another agent: its registry entry and global entry are its own keys
        registry = await ensure_kv(js, names.registry_bucket)
        await refused(
            lambda: registry.put(b["agent_id"], b"{}"), watched, f"{names.registry_bucket}.{b['agent_id']}"
        )
        assert await registry.put(a["agent_id"], b"{}") >= 1
        global_registry = await ensure_kv(js, GLOBAL_REGISTRY_BUCKET)
        await refused(lambda: global_registry.put(b["agent_id"], b"{}"), watched, GLOBAL_REGISTRY_BUCKET)
        # no stream or bucket administration, not even in its own project
        await refused(lambda: js.delete_stream(names.work_stream), watched, "stream.delete")
        await refused(lambda: js.purge_stream(names.inbox_stream), watched, "stream.purge")
        await refused(lambda: js.delete_stream(kv_stream(names.registry_bucket)), watched, "stream.delete")
        await refused(lambda: js.purge_stream(kv_stream(names.work_records_bucket)), watched, "stream.purge")
        await refused(
            lambda: js.add_stream(name="LOOM-steal", subjects=[f"loom.{other_project}.control.>"]),
            watched,
            "stream.create",
        )
        await refused(lambda: js.delete_key_value(names.registry_bucket), watched, "stream.delete")
    # the messages are still there: B reads the one A sent
    async with as_agent(scoped.url, b["creds"]) as (bnc, _):
        page = await InboxService(bnc, bnc.jetstream(timeout=5), names).read(b["agent_id"])
        assert [m.message.body for m in page.messages] == ["hi"]


async def test_provisioning_refuses_what_is_not_the_projects(scoped: Scoped, project_id: str) -> None:
    a = await scoped.mint(project_id)
    names = ProjectNames(project_id)
    async with as_agent(scoped.url, a["creds"]) as (nc, _):
        for config, why in (
            ({"name": "LOOM-other-INBOX", "subjects": ["loom.other.inbox.>"]}, "name"),
            ({"name": names.inbox_stream, "subjects": ["loom.other.inbox.>"]}, "subjects"),
            ({"name": names.channel_stream("x"), "subjects": [f"loom.{project_id}.>"]}, "subjects"),
        ):
            reply = await nc.request(
                names.provision_subject,
                json.dumps({"kind": "stream", "config": config}).encode(),
                timeout=ANSWER_S,
            )
            answer = json.loads(reply.data)
            assert answer["ok"] is False and answer["error"].startswith(why), answer
        reply = await nc.request(
            names.provision_subject,
            json.dumps({"kind": "kv", "config": {"bucket": "loom-other-agents"}}).encode(),
            timeout=ANSWER_S,
        )
        assert json.loads(reply.data)["ok"] is False
        # asked through the helpers every part uses, the refusal comes back as Weft gave it
        with pytest.raises(ProvisionError, match=r"^Weft did not create LOOM-other-INBOX: name: "):
            await ensure_stream(
                nc.jetstream(timeout=ANSWER_S),
                StreamConfig(name="LOOM-other-INBOX", subjects=["loom.other.inbox.>"]),
            )
        # the agent cannot ask for another project's provisioning either
        await nc.publish("loom.other.provision", b"{}")
        await nc.flush()


async def test_provisioning_makes_what_is_asked_keeps_what_exists_and_follows_a_channels_limits(
    scoped: Scoped, project_id: str
) -> None:
    """Weft creates first (a stream just made elsewhere has no leader for a moment, and its
    info would go unanswered): asked again, the same answer; a stream of the project made
    with other limits keeps them, a channel takes the limits it is asked for, and a bucket
    made otherwise is left as it is."""
    a = await scoped.mint(project_id)
    names = ProjectNames(project_id)
    weft_js = scoped.runtime.nc.jetstream()

    async def ask(kind: str, config: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps({"kind": kind, "config": config}).encode()
        reply = await nc.request(names.provision_subject, body, timeout=ANSWER_S)
        return dict(json.loads(reply.data))

    channel = names.channel_stream("roadmap")
    async with as_agent(scoped.url, a["creds"]) as (nc, _):
        events = {"name": names.events_stream, "subjects": [names.events_subjects], "max_msgs": 500}
        assert await ask("stream", events) == {"ok": True}
        made = (await weft_js.stream_info(names.events_stream)).config.max_msgs
        assert await ask("stream", events) == {"ok": True}  # the same answer again
        assert await ask("stream", {**events, "max_msgs": 900}) == {"ok": True}
        assert (await weft_js.stream_info(names.events_stream)).config.max_msgs == made  # kept

        roadmap = {"name": channel, "subjects": [names.channel_subject("roadmap")], "max_msgs": 100}
        assert await ask("stream", roadmap) == {"ok": True}
        assert await ask("stream", {**roadmap, "max_msgs": 300}) == {"ok": True}
        assert (await weft_js.stream_info(channel)).config.max_msgs == 300  # a channel's own limits

        bucket = {"bucket": names.registry_bucket, "history": 3}
        assert await ask("kv", bucket) == {"ok": True}
        made = (await (await weft_js.key_value(names.registry_bucket)).status()).history
        assert await ask("kv", {**bucket, "history": made + 4}) == {"ok": True}
        assert (await (await weft_js.key_value(names.registry_bucket)).status()).history == made


async def test_expired_and_revoked_credentials_are_refused(scoped: Scoped, project_id: str) -> None:
    authority = scoped.runtime.authority
    assert authority is not None
    names = ProjectNames(project_id)
    expired, _ = authority.issuer.user_creds(
        "expired", Permissions.of(agent_access(names, "e" * 32)), expires_at=int(time.time()) - 5
    )
    with pytest.raises(NatsConnectError, match="authorization failed"):
        await connect(NatsSettings(creds_content=SecretStr(expired)), url=scoped.url, timeout=3)
    # credentials that expire while connected: the server closes the connection then
    short = await authority.issue(project_id, ttl_s=2)
    closed = asyncio.Event()
    nc = await connect(
        NatsSettings(creds_content=short.creds), url=scoped.url, mode="service", on_state=_on(closed)
    )
    try:
        await asyncio.wait_for(closed.wait(), 30)
    finally:
        await nc.close()
    # revoked through the API: the live connection is closed and a new one refused
    minted = await scoped.mint(project_id)
    gone = asyncio.Event()
    live = await connect(
        NatsSettings(creds_content=SecretStr(minted["creds"])),
        url=scoped.url,
        mode="service",
        on_state=_on(gone),
    )
    try:
        async with scoped.weft.client(token=ADMIN) as api:
            answer = await api.delete(f"/api/agents/credentials/{minted['user_key']}")
        assert answer.json() == {"user_key": minted["user_key"], "revoked": True}
        await asyncio.wait_for(gone.wait(), 30)
    finally:
        await live.close()
    with pytest.raises(NatsConnectError, match="authorization failed"):
        await connect(NatsSettings(creds_content=SecretStr(minted["creds"])), url=scoped.url, timeout=3)


def _on(event: asyncio.Event) -> Callable[[str], None]:
    """A connection state callback that sets ``event`` when the server drops the connection."""

    def cb(state: str) -> None:
        if state == "disconnected":
            event.set()

    return cb


async def test_minting_needs_admin_and_scoped_mode(
    weft_factory: Any, project_id: str, scoped: Scoped
) -> None:
    async with scoped.weft.client(token=ADMIN) as api:
        bad = await api.post("/api/agents/credentials", json={"agent_id": "XYZ"})
        assert bad.status_code == 422 and "XYZ" not in bad.text
    async with weft_factory(project_id=project_id) as open_weft, open_weft.client() as api:
        refused_ = await api.post("/api/agents/credentials", json={})
        assert refused_.status_code == 409
        assert "WEFT_NATS_AUTH=scoped" in refused_.json()["message"]


@asynccontextmanager
async def warp_with(
    creds_file: Path, url: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Agent, Path]]:
    params = StdioServerParameters(
        command=WARP,
        args=list(args),
        env={
            "NATS_URL": url,
            "NATS_CREDS": str(creds_file),
            "LOOM_PROJECT_PATH": str(tmp_path),
            "LOOM_CAPABILITIES": "code",
            "LOOM_HOME": str(tmp_path),
            "HOME": str(tmp_path),
            **(env or {}),
        },
        cwd=str(tmp_path),
    )
    errlog_path = tmp_path / "warp.stderr"
    with errlog_path.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Agent(session, ""), errlog_path


async def test_warp_with_scoped_credentials_does_its_whole_job(
    scoped: Scoped, project_id: str, tmp_path: Path
) -> None:
    minted = await scoped.mint(project_id)
    creds = tmp_path / "agent.creds"
    creds.write_text(minted["creds"])
    creds.chmod(0o600)
    async with warp_with(creds, scoped.url, tmp_path, "--with-memory") as (agent, stderr):
        me = await agent.call("warp_handle_get")
        assert me["project_id"] == project_id and me["agent_id"] == minted["agent_id"]
        reg = await agent.call("warp_registry_register", {"capabilities": ["code"]})
        assert reg["agent_id"] == minted["agent_id"]
        found = await agent.call("warp_registry_discover", {"capability": "code"})
        assert [a["agent_id"] for a in found["agents"]] == [minted["agent_id"]]
        sent = await agent.call("warp_channels_send", {"channel": "roadmap", "message": "plan"})
        read = await agent.call("warp_channels_read", {"channel": "roadmap"})
        assert [m["seq"] for m in read["messages"]] == [sent["seq"]]
        await agent.call("warp_messages_send_direct", {"recipient_id": minted["agent_id"], "message": "note"})
        peeked = await agent.call("warp_messages_read_direct", {"peek": True})
        assert [m["body"] for m in peeked["messages"]] == ["note"]
        taken = await agent.call("warp_messages_read_direct", {})
        assert [m["body"] for m in taken["messages"]] == ["note"]
        assert (await agent.call("warp_messages_read_direct", {}))["messages"] == []
        # the agent protocol: its service, heartbeats and streamed answers are within its rights
        callers = Agents(nc=scoped.runtime.nc)
        try:
            served = await protocol_agent(callers, project_id, minted["agent_id"])
            # unsigned: scoped creds may not read the protocol package's inbox (docs/interop.md)
            assert not served.info.id_sig_verified
            asking = asyncio.create_task(answers(served, "scoped?"))
            prompt = await next_prompt(lambda args: agent.call("warp_messages_read_direct", args))
            reply = {"recipient_id": prompt["sender_id"], "reply_to": prompt["id"]}
            more = {"metadata": {"more": "true"}}
            await agent.call("warp_messages_send_direct", {**reply, "message": "yes", **more})
            await agent.call("warp_messages_send_direct", {**reply, "message": "and no more"})
            assert await asyncio.wait_for(asking, 30) == ["yes", "and no more"]
        finally:
            await callers.close()
        queued = await agent.call("warp_work_broadcast", {"description": "d", "capability": "code"})
        claim = await agent.call("warp_work_claim")
        assert claim["claimed"] and claim["item"]["id"] == queued["item"]["id"]
        usage = {"input_tokens": 10, "cost": 0.5}  # the item's record and the day's counter
        await agent.call(
            "warp_work_progress", {"work_id": claim["item"]["id"], "percent": 50, "usage": usage}
        )
        done = await agent.call("warp_work_complete", {"work_id": claim["item"]["id"], "result": {"ok": 1}})
        assert done["item"]["status"] == "completed" and done["item"]["usage"][0]["cost"] == 0.5
        async with scoped.weft.client(token=ADMIN, project=project_id) as api:
            today = (await api.get("/api/budgets")).json()["today"]
        assert (today["cost"], today["input_tokens"]) == (0.5, 10)
        failing = await agent.call(
            "warp_work_broadcast", {"description": "f", "capability": "code", "max_attempts": 1}
        )
        claimed = await agent.call("warp_work_claim")
        assert claimed["item"]["id"] == failing["item"]["id"]
        await agent.call("warp_work_fail", {"work_id": failing["item"]["id"], "error": "boom"})
        letters = await agent.call("warp_dlq_list")
        assert [d["item"]["id"] for d in letters["items"]] == [failing["item"]["id"]]
        await agent.call("warp_dlq_retry", {"work_id": failing["item"]["id"]})
        status = await agent.call("warp_work_queue_status")
        assert status["depths"] == {"code": 1}
        for _ in range(150):  # Pattern builds its index after Warp is ready
            result = await agent.session.call_tool("pattern_remember", {"content": "scoped", "scope": "team"})
            if not result.is_error or "still loading" not in _tool_text(result):
                break
            await asyncio.sleep(0.2)
        assert not result.is_error, _tool_text(result)
        await agent.call("warp_registry_deregister")
    text = stderr.read_text()
    assert "permissions violation" not in text.lower(), text[-3000:]
    assert parse_creds(minted["creds"])[1].decode() not in text  # the seed never reaches a log


def _tool_text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _shuttle(weft: Any, *args: str, token: str = ADMIN) -> tuple[int, str, str]:
    env = without_fabric()
    env.update(LOOM_API_URL=weft.base_url, LOOM_API_TOKEN=token, HOME=env.get("HOME", "/tmp"))
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("shuttle")),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return int(proc.returncode or 0), out.decode(), err.decode()


async def test_shuttle_mints_a_creds_file_and_revokes_it(scoped: Scoped, tmp_path: Path) -> None:
    target = tmp_path / "agent.creds"
    code, out, err = await _shuttle(
        scoped.weft, "agents", "credentials", "--out", str(target), "--ttl", "3600"
    )
    assert code == 0, err
    assert target.stat().st_mode & 0o777 == 0o600
    jwt, seed = parse_creds(target.read_text())
    credential = agent_of(jwt)
    assert credential is not None and seed.decode() not in out + err
    assert f"NATS_CREDS={target}" in out and f"LOOM_AGENT_ID={credential.agent_id}" in out
    assert f"NATS_URL={scoped.url}" in out
    nc = await connect(NatsSettings(creds=target), url=scoped.url, timeout=5)
    await nc.close()
    again, _, refused_ = await _shuttle(scoped.weft, "agents", "credentials", "--out", str(target))
    assert again != 0 and "--out" in refused_ and "already exists" in refused_
    key = out.split("shuttle agents revoke ", 1)[1].split(")", 1)[0]
    code, out, err = await _shuttle(scoped.weft, "agents", "revoke", key)
    assert code == 0 and key in out, err
    with pytest.raises(NatsConnectError, match="authorization failed"):
        await connect(NatsSettings(creds=target), url=scoped.url, timeout=3)


async def test_weft_serve_in_scoped_mode_keeps_its_issuer_across_restarts(tmp_path: Path) -> None:
    """What `make run NATS_AUTH=scoped` runs: the bundled server in operator mode; the issuer is
    made once (mode 0600) and kept, so credentials minted before a restart still work after it."""
    port = free_port()
    env = clean_env(tmp_path, WEFT_NATS_AUTH="scoped", WEFT_PORT=str(port))
    env["WEFT_NATS_PORT"] = str(free_port())  # the same NATS address after the restart
    base = f"http://127.0.0.1:{port}"
    with weft_process(["serve"], env) as proc:
        await wait_healthy(base, proc)
        async with httpx.AsyncClient(base_url=base) as client:
            minted = (await client.post("/api/agents/credentials", json={})).json()
        url = minted["env"]["NATS_URL"]
        nc = await connect(NatsSettings(creds_content=SecretStr(minted["creds"])), url=url, timeout=5)
        await nc.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        banner = proc.stderr.read() if proc.stderr else ""
    assert "[scoped: each agent needs its own credentials]" in banner
    assert "shuttle agents credentials" in banner
    issuer = tmp_path / "data" / "nats" / "issuer.json"
    assert issuer.stat().st_mode & 0o777 == 0o600
    first = issuer.read_text()
    with weft_process(["serve"], env) as proc:
        await wait_healthy(base, proc)
        nc = await connect(NatsSettings(creds_content=SecretStr(minted["creds"])), url=url, timeout=5)
        await nc.close()
    assert issuer.read_text() == first
    # the open mode (plain `make run`) stays as it was: no credentials are minted there
    with weft_process(["serve"], {**env, "WEFT_NATS_AUTH": "open", "WEFT_NATS_PORT": "-1"}) as proc:
        await wait_healthy(base, proc)
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.post("/api/agents/credentials", json={})).status_code == 409


def test_nats_auth_init_makes_an_issuer_and_a_server_config_and_keeps_accounts_on_rotation(
    tmp_path: Path,
) -> None:
    env = clean_env(tmp_path)
    first = run(["nats-auth", "init", str(tmp_path / "one")], env)
    assert first.returncode == 0, first.stderr
    issuer_file = tmp_path / "one" / "issuer.json"
    assert issuer_file.stat().st_mode & 0o777 == 0o600
    issuer = Issuer.from_json(issuer_file.read_text())
    conf = (tmp_path / "one" / "auth.conf").read_text()
    assert issuer.account_seed.decode() not in conf and issuer.operator_seed.decode() not in conf
    assert issuer.account in conf and '"/data/jwt"' in conf
    again = run(["nats-auth", "init", str(tmp_path / "one")], env)
    assert again.returncode == 2 and "already exists" in again.stderr
    rotated = run(["nats-auth", "init", str(tmp_path / "two"), "--keep-accounts", str(issuer_file)], env)
    assert rotated.returncode == 0, rotated.stderr
    second = Issuer.from_json((tmp_path / "two" / "issuer.json").read_text())
    assert second.account == issuer.account and second.operator_seed != issuer.operator_seed
    # a server started from the rotated config serves the kept account: its data would stay
    extra = (tmp_path / "two" / "auth.conf").read_text().replace("/data/jwt", str(tmp_path / "jwt"))
    with EmbeddedNatsServer(ServerConfig(extra=extra, store_dir=tmp_path / "js")):
        pass


async def test_an_operators_own_creds_sign_the_agent_protocol_registration_or_serve_unsigned(
    scoped: Scoped, project_id: str, tmp_path: Path
) -> None:
    """Creds that are not an agent's scoped ones (an operator's own account user) sign the
    agent's protocol registration with their user NKEY (the sender-identity extension);
    creds that may not ask the server who they are still serve it, unsigned."""
    assert scoped.runtime.authority is not None
    issuer = scoped.runtime.authority.issuer
    may_not_ask = Permissions(
        publish=("loom.>", "$JS.>", "$KV.>", "$SRV.>", "agents.>", "_INBOX.>"), subscribe=(">",)
    )
    callers = Agents(nc=scoped.runtime.nc)
    try:
        for name, permissions, signed in (
            ("full", Permissions.everything(), True),
            ("narrow", may_not_ask, False),
        ):
            text, user = issuer.user_creds(f"operator-{name}", permissions)
            creds = tmp_path / f"{name}.creds"
            creds.write_text(text)
            creds.chmod(0o600)
            agent_id = uuid.uuid4().hex
            env = {"LOOM_PROJECT_ID": project_id, "LOOM_AGENT_ID": agent_id}
            (home := tmp_path / name).mkdir()
            async with warp_with(creds, scoped.url, home, env=env) as (agent, stderr):
                await agent.call("warp_registry_register", {"capabilities": ["code"]})
                served = await protocol_agent(callers, project_id, agent_id)
                assert served.info.id_sig_verified is signed, name
                if signed:
                    assert served.info.identity is not None and served.info.identity.user == user
                    asking = asyncio.create_task(answers(served, "signed?"))
                    prompt = await next_prompt(lambda args: agent.call("warp_messages_read_direct", args))
                    reply = {"recipient_id": prompt["sender_id"], "reply_to": prompt["id"], "message": "yes"}
                    await agent.call("warp_messages_send_direct", reply)
                    assert await asyncio.wait_for(asking, 30) == ["yes"]
                else:
                    assert "agent protocol: serving unsigned" in stderr.read_text()
    finally:
        await callers.close()
