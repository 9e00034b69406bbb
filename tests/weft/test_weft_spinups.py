"""``GET /api/spinups``: a project's spin-up operations as a listing (newest first, by target
and state, paged), read from the spin-ups bucket whichever replica started them."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient

from shared.models import SpinupOperation, SpinupState, Target
from shared.names import ProjectNames
from weft.spinup.store import SpinupRecord, SpinupStore


async def started(
    store: SpinupStore, project_id: str, target: dict[str, object], state: SpinupState
) -> SpinupOperation:
    """An operation admitted and released the way the spin-up manager does it."""
    op = SpinupOperation(
        project_id=project_id,
        target_id=str(target["id"]),
        target_name=str(target["name"]),
        agent_id=uuid.uuid4().hex,
        state=state,
    )
    assert await store.admit(Target.model_validate(target), SpinupRecord(op=op)) is None
    await store.release(op.target_id, op.id, keep_live=False)
    return op


async def test_spinups_newest_first_by_target_and_state_paged(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    assert (await api.get("/api/spinups")).json() == {"items": [], "next_cursor": None, "total": 0}
    targets = []
    for name in ("one", "two"):
        created = await api.post(
            "/api/targets", json={"name": name, "mechanism": "local", "config": {"command": ["/bin/true"]}}
        )
        assert created.status_code == 201, created.text
        targets.append(created.json())
    store = SpinupStore(nc.jetstream(), ProjectNames(project_id))
    ops = [
        await started(store, project_id, targets[0], SpinupState.STOPPED),
        await started(store, project_id, targets[1], SpinupState.FAILED),
        await started(store, project_id, targets[0], SpinupState.REGISTERED),
    ]

    listed = (await api.get("/api/spinups")).json()
    assert [op["id"] for op in listed["items"]] == [op.id for op in reversed(ops)]
    assert listed["total"] == 3 and listed["next_cursor"] is None
    assert listed["items"][0]["target_name"] == "one" and listed["items"][0]["state"] == "registered"
    one = (await api.get("/api/spinups", params={"target_id": targets[0]["id"]})).json()
    assert [op["id"] for op in one["items"]] == [ops[2].id, ops[0].id] and one["total"] == 2
    failed = (await api.get("/api/spinups", params={"state": "failed"})).json()
    assert [op["id"] for op in failed["items"]] == [ops[1].id]

    first = (await api.get("/api/spinups", params={"limit": 2})).json()
    assert [op["id"] for op in first["items"]] == [ops[2].id, ops[1].id] and first["next_cursor"]
    rest = (await api.get("/api/spinups", params={"limit": 2, "cursor": first["next_cursor"]})).json()
    assert [op["id"] for op in rest["items"]] == [ops[0].id] and rest["next_cursor"] is None

    bad = await api.get("/api/spinups", params={"cursor": "bm90LWEtY3Vyc29y"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_cursor"
    wrong = await api.get("/api/spinups", params={"target_id": "Secret-Value-123"})
    assert wrong.status_code == 422 and "Secret-Value-123" not in wrong.text
    unknown = await api.get("/api/spinups", params={"colour": "blue"})
    assert unknown.status_code == 422 and "blue" not in unknown.text


async def test_spinups_need_a_token_and_any_scope_reads_them(weft_factory: Any, project_id: str) -> None:
    async with weft_factory(
        project_id=project_id, api_tokens=["read:reader-token-1", "admin-token-2"]
    ) as weft:
        async with weft.client() as anonymous:
            assert (await anonymous.get("/api/spinups")).status_code == 401
        async with weft.client("reader-token-1") as reader:
            assert (await reader.get("/api/spinups")).status_code == 200
