"""Leases through Weft: REST listing and conflicts, an operator's revoke (needs operate),
lease events on the WebSocket, leases ended by Weft when their work ends or their holder
goes offline, and project isolation."""

from __future__ import annotations

from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, claimant, eventually, register, ws_connect

from shared.leases.book import LeaseBook, LeaseConflict
from shared.models import AgentStatus, WorkSubmission
from shared.names import ProjectNames
from testsupport.work import work_queue


async def test_leases_over_rest_and_websocket(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    alice = await register(nc, project_id, handle="alice")
    bob = await register(nc, project_id, handle="bob")
    book = LeaseBook(nc, ProjectNames(project_id))
    try:
        async with ws_connect(f"{weft.ws_url}/api/ws?topics=leases") as conn:
            ws = WsClient(conn)
            await ws.next_of("welcome")
            held = await book.acquire(alice.agent_id, ["src/api/**"], handle="alice", reason="refactor")
            await book.acquire(bob.agent_id, ["docs/*.md"], handle="bob", mode="shared")  # type: ignore[arg-type]
            listed = (await api.get("/api/leases")).json()
            assert {lease["holder_handle"] for lease in listed["items"]} == {"alice", "bob"}
            mine = (await api.get("/api/leases", params={"holder": alice.agent_id})).json()["items"]
            assert [lease["id"] for lease in mine] == [held.id] and mine[0]["token"] == held.token
            clash = (await api.get("/api/leases", params={"path": ["src/api/users.py"]})).json()
            assert [c["lease_id"] for c in clash["conflicts"]] == [held.id]
            assert clash["conflicts"][0]["holder_handle"] == "alice"
            own = (
                await api.get("/api/leases", params={"path": "src/api/users.py", "as_agent": alice.agent_id})
            ).json()
            assert own["conflicts"] == []
            shown = (await api.get(f"/api/leases/{held.id}")).json()
            assert shown["patterns"] == ["src/api/**"] and shown["reason"] == "refactor"

            bad = await api.get("/api/leases", params={"holder": "s3cr3t-T0KEN"})
            assert bad.status_code == 400 and bad.json()["details"]["field"] == "holder"
            assert "s3cr3t" not in bad.text
            bad_path = await api.get("/api/leases", params={"path": "../s3cr3t-T0KEN"})
            assert bad_path.status_code == 400 and bad_path.json()["details"]["field"] == "paths.0"
            assert "s3cr3t" not in bad_path.text
            assert (await api.get(f"/api/leases/{'f' * 32}")).status_code == 404
            assert (await api.get("/api/leases/nothex")).status_code in (400, 422)

            revoked = await api.delete(f"/api/leases/{held.id}")
            assert revoked.status_code == 200 and revoked.json()["id"] == held.id
            assert (await api.delete(f"/api/leases/{held.id}")).status_code == 404
            taken = await book.acquire(bob.agent_id, ["src/api/users.py"], handle="bob")
            assert taken.token > held.token

            events = await ws.events_until(
                lambda seen: (
                    {"lease.revoked", "lease.acquired"} <= {f"{e['kind']}.{e['action']}" for e in seen}
                    and sum(1 for e in seen if e["action"] == "acquired") >= 3
                )
            )
            revoke = next(e for e in events if e["action"] == "revoked")
            assert revoke["subject_id"] == held.id and revoke["data"]["why"] == "revoked by operator"
    finally:
        await book.stop()


async def test_revoking_needs_the_operate_scope(weft_factory: Any, nc: NatsClient, project_id: str) -> None:
    tokens = "read:viewer-token-0001,operate:operator-token-01"
    async with weft_factory(project_id=project_id, api_tokens=tokens) as running:
        agent = await register(nc, project_id)
        book = LeaseBook(nc, ProjectNames(project_id))
        try:
            held = await book.acquire(agent.agent_id, ["a/**"])
            async with running.client(token="viewer-token-0001") as viewer:
                assert (await viewer.get("/api/leases")).status_code == 200
                assert (await viewer.delete(f"/api/leases/{held.id}")).status_code == 403
            async with running.client(token="operator-token-01") as operator:
                assert (await operator.delete(f"/api/leases/{held.id}")).status_code == 200
            async with running.client() as anonymous:
                assert (await anonymous.get("/api/leases")).status_code == 401
        finally:
            await book.stop()


async def test_weft_ends_leases_whose_work_ended_or_whose_holder_went_offline(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    worker = await register(nc, project_id, handle="worker")
    idle = await register(nc, project_id, handle="idle")
    queue = work_queue(nc, names)
    book = LeaseBook(nc, names)
    try:
        item = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"))
        assert await queue.claim(claimant(worker)) is not None
        tied = await book.acquire(worker.agent_id, ["pkg/**"], work_id=item.id)
        loose = await book.acquire(idle.agent_id, ["web/**"])

        await queue.cancel(item.id, reason="not needed")

        async def gone(lease_id: str) -> bool | None:
            return True if (await api.get(f"/api/leases/{lease_id}")).status_code == 404 else None

        await eventually(lambda: gone(tied.id), what="the cancelled work's lease ended")
        assert (await api.get(f"/api/leases/{loose.id}")).status_code == 200

        await register(nc, project_id, aid=idle.agent_id, handle="idle", status=AgentStatus.OFFLINE)
        await eventually(lambda: gone(loose.id), what="the offline holder's lease ended")
        try:
            await book.acquire(worker.agent_id, ["web/index.html"])
        except LeaseConflict as exc:  # pragma: no cover - the assertion below explains
            raise AssertionError("the offline holder's lease still blocks") from exc
    finally:
        await book.stop()


async def test_projects_see_only_their_own_leases(weft_factory: Any, nc: NatsClient, project_id: str) -> None:
    other = project_id + "-x"
    async with weft_factory(project_id=project_id) as running:
        mine = LeaseBook(nc, ProjectNames(project_id))
        theirs = LeaseBook(nc, ProjectNames(other))
        try:
            a = await register(nc, project_id)
            b = await register(nc, other)
            held = await mine.acquire(a.agent_id, ["src/**"])
            foreign = await theirs.acquire(b.agent_id, ["src/**"])
            async with running.client() as client:
                listed = (await client.get("/api/leases")).json()["items"]
                assert [lease["id"] for lease in listed] == [held.id]
                assert (await client.get(f"/api/leases/{foreign.id}")).status_code == 404
                assert (await client.delete(f"/api/leases/{foreign.id}")).status_code == 404
            async with running.client(project=other) as client:
                assert (await client.get(f"/api/leases/{foreign.id}")).json()["holder"] == b.agent_id
                assert [lease["id"] for lease in (await client.get("/api/leases")).json()["items"]] == [
                    foreign.id
                ]
        finally:
            await mine.stop()
            await theirs.stop()
