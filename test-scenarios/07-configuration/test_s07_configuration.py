"""Scenario 7: channels and their limits come from the configuration files; bad ones are refused.

The user's ``~/.loom/config.toml`` adds a channel; the project's ``.loom/config.json``
adds another and overrides a default one. Agents started in the project see both,
and the limits hold (a 5-message channel keeps the newest 5). A broken project file
is reported with the file and the field, an edit takes effect on the next call, and
bad settings stop ``warp`` and ``weft`` at start-up with one clear line.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

from scenario_harness import Fabric, agents_in, run_command

USER_TOML = """
[channels.standup]
description = "Daily standup notes"
max_messages = 50
"""


def project_config(incident_limit: int) -> str:
    return json.dumps(
        {
            "channels": {
                "incidents": {
                    "description": "Production incidents",
                    "max_messages": incident_limit,
                    "max_age_s": 3600,
                },
                "roadmap": {"description": "Q3 roadmap", "max_messages": 200},
            },
            "notes": "keys other than channels are left alone",
        }
    )


async def test_channels_and_limits_from_the_project_file(fabric: Fabric) -> None:
    user_file = fabric.home / ".loom" / "config.toml"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text(USER_TOML)
    project_file = fabric.project_path / ".loom" / "config.json"
    project_file.parent.mkdir(parents=True, exist_ok=True)
    project_file.write_text(project_config(5))

    async with AsyncExitStack() as stack:
        team = await agents_in(stack, fabric, {"alice": {}, "bob": {}})
        alice, bob = team["alice"], team["bob"]

        listing = await alice.call("warp_channels_list")
        channels = {c["name"]: c for c in listing["channels"]}
        assert set(channels) == {"roadmap", "parallel-work", "errors", "standup", "incidents"}
        assert channels["roadmap"]["description"] == "Q3 roadmap"  # the project file overrides the default
        assert channels["standup"]["description"] == "Daily standup notes"  # from the user file
        assert channels["incidents"]["max_messages"] == 5
        assert listing["config_files"] == [str(user_file), str(project_file)]

        # The limit holds: 8 incidents posted, the newest 5 kept.
        for n in range(8):
            await (alice if n % 2 else bob).call(
                "warp_channels_send", channel="incidents", message=f"incident {n}"
            )
        page = await bob.call("warp_channels_read", channel="incidents", from_beginning=True, limit=50)
        assert [m["body"] for m in page["messages"]] == [f"incident {n}" for n in range(3, 8)]
        status = (await bob.call("warp_channels_status", channel="incidents"))["channels"][0]
        assert status["messages"] == 5 and status["max_age_s"] == 3600

        # A channel nobody configured is refused, saying where to add it.
        refused = await alice.error("warp_channels_send", channel="random", message="hello?")
        assert "not a configured channel" in refused and ".loom/config.json" in refused

        # An edit takes effect on the next call, and the stream follows the new limit.
        project_file.write_text(project_config(3))
        await alice.call("warp_channels_send", channel="incidents", message="incident 8")
        page = await bob.call("warp_channels_read", channel="incidents", from_beginning=True, limit=50)
        assert [m["body"] for m in page["messages"]] == ["incident 6", "incident 7", "incident 8"]

    # Weft reads the same streams.
    async with fabric.api() as api:
        found = {c["name"]: c for c in (await api.get("/api/channels")).json()["channels"]}
    assert found["incidents"]["messages"] == 3


async def test_shuttle_runs_with_warp_channels_in_the_shared_user_file(fabric: Fabric) -> None:
    user_file = fabric.home / ".loom" / "config.toml"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text(USER_TOML)
    result = await fabric.shuttle("--json", "stats")
    assert result.exit_code == 0, result.stderr


async def test_a_broken_project_file_is_reported_with_file_and_field(fabric: Fabric) -> None:
    project_file = fabric.project_path / ".loom" / "config.json"
    project_file.parent.mkdir(parents=True, exist_ok=True)
    project_file.write_text(project_config(5))
    async with fabric.agent("alice") as alice:
        await alice.call("warp_channels_send", channel="incidents", message="before the edit")
        project_file.write_text(project_config(0))  # max_messages must be >= 1
        broken = await alice.error("warp_channels_send", channel="incidents", message="during the outage")
        assert str(project_file) in broken and "channels.incidents.max_messages" in broken
        assert "channels.incidents.max_messages" in await alice.error("warp_channels_list")
        project_file.write_text(project_config(5))
        page = await alice.call("warp_channels_read", channel="incidents", from_beginning=True)
        assert [m["body"] for m in page["messages"]] == ["before the edit"]  # nothing was sent meanwhile


async def test_bad_settings_stop_warp_and_weft_at_start_up(fabric: Fabric) -> None:
    base = {"HOME": str(fabric.home), "NATS_URL": fabric.conn.url, "LOOM_PROJECT_ID": fabric.project_id}

    warp = await run_command("warp", env=base | {"LOOM_CAPABILITIES": "code,Code Review"}, timeout=30)
    assert warp.exit_code == 2
    assert warp.stdout == ""  # stdout is only ever MCP frames
    assert "LOOM_CAPABILITIES" in warp.stderr and "lowercase letters" in warp.stderr
    assert "Code Review" not in warp.stderr  # the rule, never the rejected value

    warp = await run_command("warp", env=base | {"LOOM_PROJECT_ID": "Not A Project"}, timeout=30)
    assert warp.exit_code == 2 and "LOOM_PROJECT_ID" in warp.stderr

    policy = fabric.workdir / "policy.yaml"
    policy.write_text("boundaries:\n  corporate:\n    allowed_agent_types: copilot\n")
    weft = await run_command(
        "weft", "serve", env=base | {"WEFT_POLICY_FILE": str(policy), "WEFT_PORT": "0"}, timeout=30
    )
    assert weft.exit_code == 2
    last = weft.stderr.strip().splitlines()[-1]
    assert str(policy) in last and "boundaries.corporate.allowed_agent_types" in last
