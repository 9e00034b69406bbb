"""File leases through real Warp processes (no Weft running): an unregistered agent may not
lease, a lease for work not held is refused, one agent's conflict names the other, and
Warp itself ends its leases when their work leaves its hands and when it stops."""

from __future__ import annotations

from pathlib import Path

from nats.aio.client import Client as NatsClient
from warp_harness import spawn_warp

from shared.leases.book import LeaseBook
from shared.names import ProjectNames

A_ID = "a" * 32
B_ID = "b" * 32
AUTO = {"LOOM_CAPABILITIES": "code", "LOOM_AUTO_REGISTER": "1"}


async def test_leases_follow_the_work_and_the_process(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    book = LeaseBook(nc, ProjectNames(warp_env["LOOM_PROJECT_ID"]))
    try:
        async with spawn_warp({**warp_env, "LOOM_AGENT_ID": B_ID}, tmp_path, name="unregistered") as lone:
            refused = await lone.ready_err("warp_lease_acquire", {"patterns": ["src/**"]})
            assert "register first" in refused
        async with (
            spawn_warp(
                {**warp_env, **AUTO, "LOOM_AGENT_ID": A_ID, "LOOM_HANDLE": "alice"}, tmp_path, name="a"
            ) as a,
            spawn_warp(
                {**warp_env, **AUTO, "LOOM_AGENT_ID": B_ID, "LOOM_HANDLE": "bob"}, tmp_path, name="b"
            ) as b,
        ):
            item = (await a.ready_ok("warp_work_broadcast", {"description": "split", "capability": "code"}))[
                "item"
            ]
            not_held = await a.err("warp_lease_acquire", {"patterns": ["src/**"], "work_id": item["id"]})
            assert "work_id" in not_held and "do not hold" in not_held
            assert (await a.ok("warp_work_claim"))["item"]["id"] == item["id"]
            tied = (await a.ok("warp_lease_acquire", {"patterns": ["src/api/**"], "work_id": item["id"]}))[
                "lease"
            ]
            loose = (await a.ok("warp_lease_acquire", {"patterns": ["/Makefile"], "mode": "shared"}))["lease"]

            conflict = await b.ready_err("warp_lease_acquire", {"patterns": ["src/api/users.py"]})
            assert (
                "alice" in conflict and A_ID in conflict and item["id"] in conflict and tied["id"] in conflict
            )
            shared = (await b.ok("warp_lease_acquire", {"patterns": ["./Makefile"], "mode": "shared"}))[
                "lease"
            ]
            everyone = (await b.ok("warp_lease_list", {"scope": "all"}))["items"]
            assert {lease["id"] for lease in everyone} == {tied["id"], loose["id"], shared["id"]}

            await a.ok("warp_work_complete", {"work_id": item["id"], "result": "split"})
            left = {lease.id for lease in await book.listing()}
            assert tied["id"] not in left, "completing the work ended its lease (Warp, without Weft)"
            assert {loose["id"], shared["id"]} <= left
            taken = (await b.ok("warp_lease_acquire", {"patterns": ["src/api/users.py"]}))["lease"]
            assert taken["token"] > tied["token"]
        assert await book.listing() == [], "stopping Warp ended the leases it held"
    finally:
        await book.stop()
