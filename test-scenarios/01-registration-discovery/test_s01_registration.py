"""Scenario 1: agents register in every scope and discover exactly whom each scope allows.

Five Warp agents in three projects and three users share one NATS. Each discovers the
others through its own MCP session; the registry answers by scope (private, personal,
team, public) and strips host and metadata from entries seen from outside the owner's
project and user. Weft and Shuttle show the project's own registry. NATS credentials
never appear in a registry entry, a log line, a REST answer or a tool error.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import quote

from scenario_harness import Connection, Fabric, agents_in, new_project_id, new_user_id

from shared.settings import NatsSettings
from testsupport.servers import AuthServer


def by_id(listing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["agent_id"]: a for a in listing["agents"]}


async def test_discovery_follows_scopes_and_redacts_outsiders(fabric: Fabric) -> None:
    me, colleague, stranger = new_user_id(), new_user_id(), new_user_id()
    other_project = fabric.project(new_project_id())
    third_project = fabric.project(new_project_id())
    secret_meta = {"room": "b-204", "ticket": "LOOM-7"}

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {
                "alice": {"capabilities": ["code", "review"], "agent_type": "claude-code", "user_id": me},
                "bob": {"capabilities": ["code"], "scope": "private", "user_id": me},
                "frank": {"capabilities": ["docs"], "agent_type": "copilot", "user_id": colleague},
                # carol: same user as alice, another project, personal scope (follows her user).
                "carol": {"fabric": other_project, "user_id": me, "register": False},
                # erin: same user as alice, another project, team scope (stays in that project).
                "erin": {"fabric": other_project, "user_id": me, "capabilities": ["code"]},
                # dave: a stranger's public agent in a third project.
                "dave": {"fabric": third_project, "user_id": stranger, "register": False},
            },
        )
        alice, bob, frank, carol, erin, dave = (
            agents[h] for h in ("alice", "bob", "frank", "carol", "erin", "dave")
        )
        await carol.register(scope="personal", capabilities=["review"], metadata=secret_meta)
        await dave.register(scope="public", capabilities=["review"], metadata=secret_meta)

        ours = {a.agent_id for a in (alice, bob, frank, carol, erin, dave)}

        # alice (project P, user "me"): her team, her own personal agent elsewhere, the public one.
        seen = by_id(await alice.call("warp_registry_discover", limit=500))
        assert set(seen) & ours == {alice.agent_id, frank.agent_id, carol.agent_id, dave.agent_id}
        assert seen[alice.agent_id]["is_self"] is True
        assert seen[carol.agent_id]["metadata"] == secret_meta  # same user: nothing hidden
        assert seen[carol.agent_id]["hostname"] != ""
        assert seen[dave.agent_id]["metadata"] == {} and seen[dave.agent_id]["hostname"] == ""
        assert seen[dave.agent_id]["project_id"] == third_project.project_id

        # frank (project P, another user): the team, the public agent; not alice's personal one.
        seen = by_id(await frank.call("warp_registry_discover", limit=500))
        assert set(seen) & ours == {alice.agent_id, frank.agent_id, dave.agent_id}

        # bob is private: only bob sees bob.
        seen = by_id(await bob.call("warp_registry_discover", limit=500))
        assert bob.agent_id in seen and seen[bob.agent_id]["scope"] == "private"
        hidden = await alice.error("warp_registry_get_info", agent_id=bob.agent_id)
        assert "no agent with this id that you can see" in hidden and bob.agent_id not in hidden

        # erin (team scope in the other project) sees her project and the personal/public ones she may.
        seen = by_id(await erin.call("warp_registry_discover", limit=500))
        assert set(seen) & ours == {erin.agent_id, carol.agent_id, dave.agent_id}

        # Filters combine: capability, agent type, handle.
        reviewers = by_id(await alice.call("warp_registry_discover", capability="review", limit=500))
        assert set(reviewers) & ours == {alice.agent_id, carol.agent_id, dave.agent_id}
        copilots = by_id(await alice.call("warp_registry_discover", agent_type="copilot", limit=500))
        assert set(copilots) & ours == {frank.agent_id}
        named = await alice.call("warp_registry_discover", handle="dave")
        assert [a["agent_id"] for a in named["agents"] if a["agent_id"] in ours] == [dave.agent_id]

        # get_info across projects works for what discover shows, redacted the same way.
        info = await frank.call("warp_registry_get_info", agent_id=dave.agent_id)
        assert info["metadata"] == {} and info["hostname"] == "" and info["scope"] == "public"

        # Weft and Shuttle show project P's own registry (the operator's view), nobody else's.
        async with fabric.api() as api:
            listed = (await api.get("/api/agents", params={"limit": 200})).json()
        assert {a["agent_id"] for a in listed["items"]} == {alice.agent_id, bob.agent_id, frank.agent_id}
        shown = await fabric.shuttle_json("agents", "list")
        rows = shown["items"] if isinstance(shown, dict) else shown
        assert {a["agent_id"] for a in rows} == {alice.agent_id, bob.agent_id, frank.agent_id}
        other = await other_project.shuttle_json("agents", "show", carol.agent_id)
        assert other["scope"] == "personal" and other["handle"] == "carol"


async def test_nats_credentials_never_reach_the_registry_logs_or_api(
    fabric: Fabric, nats_auth_server: AuthServer, weft_factory: Any
) -> None:
    secret = nats_auth_server.password
    forms = {secret, quote(secret, safe="")}
    host = nats_auth_server.url.split("://", 1)[1]
    with_creds = Connection(f"nats://{nats_auth_server.user}:{quote(secret, safe='')}@{host}")
    nats = NatsSettings(url=nats_auth_server.url, user=nats_auth_server.user, password=secret)

    with weft_factory(nats=nats) as weft:
        fab = fabric.served_by(weft).via(with_creds)
        async with fab.agent("keeper", capabilities=["code"]) as keeper:
            entry = await keeper.call("warp_registry_get_info")
            listing = await keeper.call("warp_registry_discover")
            async with fab.api() as api:
                rest = (await api.get("/api/agents")).text + (await api.get("/health")).text
            shown = await fab.shuttle("--json", "agents", "show", keeper.agent_id)
            assert shown.exit_code == 0, shown.stderr
            # A wrong password: refused, and the error does not echo it.
            wrong = fab.via(Connection(f"nats://{nats_auth_server.user}:not-{quote(secret, safe='')}@{host}"))
            async with wrong.agent("intruder", wait_ready=False) as intruder:
                refused = await intruder.error("warp_registry_register")
                intruder_log = intruder.stderr()
        keeper_log = keeper.stderr()

    assert entry["agent_id"] == keeper.agent_id
    assert "NATS" in refused
    for text in (
        str(entry),
        str(listing),
        rest,
        shown.stdout,
        shown.stderr,
        keeper_log,
        refused,
        intruder_log,
    ):
        for form in forms:
            assert form not in text
