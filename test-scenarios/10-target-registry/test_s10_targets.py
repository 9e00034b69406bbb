"""Scenario 10: an operator manages spin-up targets with Shuttle; Weft's REST API agrees.

``shuttle targets add`` (flags and ``--from-file``), ``list``, ``show`` (by name and by id),
``update``, ``disable``/``enable``, ``test`` and ``remove``: after each command the same
target read back over REST is what Shuttle printed, and the change is what was asked. Bad
input is refused with the field named, and a secret never lands in a target.
"""

from __future__ import annotations

import sys
from typing import Any

from scenario_harness import Fabric

VOLATILE = ("updated_at", "last_health_check", "health", "health_detail")


def stable(target: dict[str, Any]) -> dict[str, Any]:
    """A target without the fields a background health check or an update may move."""
    return {k: v for k, v in target.items() if k not in VOLATILE}


async def rest(fabric: Fabric, path: str) -> Any:
    async with fabric.api() as api:
        response = await api.get(path)
    return response.status_code, response.json()


async def test_targets_lifecycle_through_shuttle_matches_rest(fabric: Fabric) -> None:
    python = sys.executable  # a command that exists, so `targets test` can pass
    added = await fabric.shuttle_json(
        "targets", "add", "laptop", "-m", "local",
        "--command", f"{python} -m weft.spinup.demo_agent",
        "-t", "claude-code", "-c", "code", "-c", "review", "-b", "default",
        "--max-concurrent", "2", "--cooldown", "5", "--idle-timeout", "60",
        "--env", "LOOM_HEARTBEAT_S=5", "--tag", "dev",
    )  # fmt: skip
    assert (added["name"], added["mechanism"], added["agent_type"]) == ("laptop", "local", "claude-code")
    assert sorted(added["capabilities"]) == ["code", "review"] and added["boundaries"] == ["default"]
    assert (added["max_concurrent"], added["cooldown_s"], added["idle_timeout_s"]) == (2, 5, 60)
    assert added["config"]["command"][1:] == ["-m", "weft.spinup.demo_agent"]  # split, never a shell
    assert added["config"]["env"] == {"LOOM_HEARTBEAT_S": "5"}
    assert added["enabled"] is True and added["project_id"] == fabric.project_id

    spec = fabric.workdir / "hook.yaml"
    spec.write_text(
        "name: runners\n"
        "mechanism: webhook\n"
        "agent_type: copilot\n"
        "capabilities: [test]\n"
        "config:\n"
        "  url: http://127.0.0.1:9/spawn?pool={target_name}\n"
        "  secret_env: RUNNERS_SECRET\n"
    )
    hook = await fabric.shuttle_json("targets", "add", "--from-file", str(spec), "--max-concurrent", "3")
    assert (hook["mechanism"], hook["max_concurrent"], hook["agent_type"]) == ("webhook", 3, "copilot")
    assert "secret_env" in hook["config"]

    # list and show agree with REST, by name and by id.
    listed = await fabric.shuttle_json("targets", "list")
    status, page = await rest(fabric, "/api/targets")
    assert status == 200
    assert {t["name"]: stable(t) for t in listed["items"]} == {t["name"]: stable(t) for t in page["items"]}
    assert {t["name"] for t in page["items"]} == {"laptop", "runners"}
    by_name = await fabric.shuttle_json("targets", "show", "laptop")
    by_id = await fabric.shuttle_json("targets", "show", added["id"])
    assert stable(by_name) == stable(by_id) == stable(added)
    assert stable((await rest(fabric, f"/api/targets/{added['id']}"))[1]) == stable(added)

    # update: fields replaced, config flags merged into the current config.
    updated = await fabric.shuttle_json(
        "targets", "update", "laptop", "-c", "code", "--max-concurrent", "4", "--cwd", str(fabric.workdir)
    )
    assert updated["capabilities"] == ["code"] and updated["max_concurrent"] == 4
    assert updated["config"]["cwd"] == str(fabric.workdir)
    assert updated["config"]["env"] == {"LOOM_HEARTBEAT_S": "5"}, "config flags must merge, not replace"
    assert stable((await rest(fabric, "/api/targets/laptop"))[1]) == stable(updated)

    # disable / enable.
    assert (await fabric.shuttle_json("targets", "disable", "laptop"))["enabled"] is False
    assert (await rest(fabric, "/api/targets/laptop"))[1]["enabled"] is False
    assert (await fabric.shuttle_json("targets", "enable", added["id"]))["enabled"] is True
    assert (await rest(fabric, "/api/targets/laptop"))[1]["enabled"] is True

    # test: the local command exists -> exit 0; a missing one -> exit 1 naming the reason.
    ok = await fabric.shuttle_json("targets", "test", "laptop")
    assert ok["ok"] is True and ok["target_id"] == added["id"]
    await fabric.shuttle_json("targets", "update", "laptop", "--command", "/nonexistent/loom-agent")
    failed = await fabric.shuttle("targets", "test", "laptop")
    assert failed.exit_code == 1 and "laptop" in failed.stderr, failed
    assert "/nonexistent/loom-agent" in failed.stderr or "not found" in failed.stderr.lower(), failed.stderr

    # remove: refused without --yes (no terminal), then gone from REST.
    refused = await fabric.shuttle("targets", "remove", "runners")
    assert refused.exit_code == 2 and "--yes" in refused.stderr, refused
    assert (await rest(fabric, "/api/targets/runners"))[0] == 200
    await fabric.shuttle("targets", "remove", "runners", "--yes")
    status, body = await rest(fabric, "/api/targets/runners")
    assert status == 404 and body["error"] == "not_found", body
    assert [t["name"] for t in (await fabric.shuttle_json("targets", "list"))["items"]] == ["laptop"]


async def test_bad_targets_are_refused_naming_the_field(fabric: Fabric) -> None:
    await fabric.shuttle_json("targets", "add", "box", "-m", "local", "--command", sys.executable)

    duplicate = await fabric.shuttle("targets", "add", "box", "-m", "local", "--command", sys.executable)
    assert duplicate.exit_code == 1 and "name: a target with this name already" in duplicate.stderr, duplicate

    no_command = await fabric.shuttle("targets", "add", "empty", "-m", "local")
    assert no_command.exit_code == 1 and "config.command" in no_command.stderr, no_command

    bad_name = await fabric.shuttle("targets", "add", "Bad Name", "-m", "local", "--command", sys.executable)
    assert bad_name.exit_code in (1, 2) and "name" in bad_name.stderr, bad_name

    unknown = await fabric.shuttle("targets", "add", "x", "-m", "teleport", "--command", sys.executable)
    assert unknown.exit_code == 1 and "mechanism: must be one of local" in unknown.stderr, unknown
    assert "teleport" not in unknown.stderr  # Weft's registry decides, and does not repeat it

    missing = await fabric.shuttle("targets", "show", "nope")
    assert missing.exit_code == 1 and "target: no target with this id or name" in missing.stderr, missing

    # Secrets never go into a target: a secret-looking key or a URL with credentials is refused,
    # and the refusal does not repeat the secret.
    secret = "hunter2-very-secret"
    with_token = await fabric.shuttle(
        "targets",
        "add",
        "leaky",
        "-m",
        "webhook",
        "--url",
        "http://127.0.0.1:9/x",
        "--set",
        f"token={secret}",
    )
    assert with_token.exit_code == 1 and "token" in with_token.stderr, with_token
    with_url = await fabric.shuttle(
        "targets", "add", "leaky", "-m", "local", "--command", sys.executable,
        "--nats-url", f"nats://loom:{secret}@127.0.0.1:4222",
    )  # fmt: skip
    assert with_url.exit_code == 1 and "nats_url" in with_url.stderr, with_url
    for result in (with_token, with_url):
        assert secret not in result.stdout + result.stderr
    status, page = await rest(fabric, "/api/targets")
    assert status == 200 and [t["name"] for t in page["items"]] == ["box"]
    assert secret not in str(page)


async def test_the_variable_a_target_reads_its_secret_from_is_shown(fabric: Fabric) -> None:
    hook = await fabric.shuttle_json(
        "targets",
        "add",
        "signed",
        "-m",
        "webhook",
        "--url",
        "http://127.0.0.1:9/x",
        "--secret-env",
        "RUNNERS_SECRET",
    )
    assert hook["config"]["secret_env"] == "RUNNERS_SECRET"
