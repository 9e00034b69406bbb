"""``targets`` and ``spin-up`` against a real Weft on a real nats-server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shuttle_helpers import Cli


def weft(cli: Cli, method: str, path: str, **kwargs: Any) -> Any:
    with cli.weft.api(cli.project) as api:
        return api.request(method, path, **kwargs)


# Weft's health checker may record a check (and so bump updated_at) between two reads.
HEALTH_FIELDS = frozenset({"health", "health_detail", "last_health_check", "updated_at"})


def without_health(target: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in target.items() if key not in HEALTH_FIELDS}


def stored(cli: Cli, ref: str) -> dict[str, Any]:
    response = weft(cli, "GET", f"/api/targets/{ref}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def add_local(cli: Cli, name: str = "build-box", *extra: str) -> dict[str, Any]:
    doc = cli.json(
        "targets", "add", name, "-m", "local",
        "--command", "python -m warp --flag 'two words'", "--cwd", "/srv/agents", "--env", "MODE=ci",
        "-t", "claude-code", "-c", "code", "-c", "review", "-b", "default",
        "--max-concurrent", "2", "--cooldown", "5", "--idle-timeout", "60", "--tag", "ci", *extra,
    )  # fmt: skip
    assert isinstance(doc, dict)
    return doc


async def test_add_with_flags_is_what_weft_stores(cli: Cli) -> None:
    created = add_local(cli)
    target = stored(cli, "build-box")
    assert without_health(target) == without_health(created)
    assert target["mechanism"] == "local" and target["agent_type"] == "claude-code"
    assert target["config"]["command"] == ["python", "-m", "warp", "--flag", "two words"]
    assert target["config"]["cwd"] == "/srv/agents" and target["config"]["env"] == {"MODE": "ci"}
    assert target["capabilities"] == ["code", "review"] and target["max_concurrent"] == 2
    assert target["cooldown_s"] == 5 and target["idle_timeout_s"] == 60 and target["tags"] == ["ci"]
    assert target["enabled"] is True
    assert without_health(stored(cli, target["id"])) == without_health(target)  # by id, as by name


async def test_add_per_mechanism_flags(cli: Cli) -> None:
    ssh = cli.json(
        "targets", "add", "remote", "-m", "ssh", "--host", "build.example.org", "--port", "2222",
        "--user", "loom", "--key-file", "/keys/id_ed25519", "--host-key-policy", "accept-new",
        "--known-hosts", "/keys/known_hosts", "--command", "warp",
    )  # fmt: skip
    assert stored(cli, "remote")["config"] == {
        "host": "build.example.org",
        "port": 2222,
        "username": "loom",
        "key_file": "/keys/id_ed25519",
        "host_key_policy": "accept-new",
        "known_hosts": "/keys/known_hosts",
        "command": ["warp"],
    }
    assert ssh["mechanism"] == "ssh"
    gha = cli.json(
        "targets", "add", "gha", "-m", "github-actions", "--repo", "acme/app", "--workflow", "agent.yml",
        "--ref", "main", "--input", "model=opus", "--input", "size=large",
    )  # fmt: skip
    assert gha["config"] == {"repository": "acme/app", "workflow": "agent.yml", "ref": "main",
                             "inputs": {"model": "opus", "size": "large"}}  # fmt: skip
    hook = cli.json(
        "targets", "add", "hook", "-m", "webhook", "--url", "https://hooks.example.org/start",
        "--stop-url", "https://hooks.example.org/stop", "--set", "timeout_s=3",
        "--set", 'headers={"X-A": "1"}', "--disabled",
    )  # fmt: skip
    assert hook["config"]["timeout_s"] == 3 and hook["config"]["headers"] == {"X-A": "1"}
    assert hook["enabled"] is False and stored(cli, "hook")["enabled"] is False
    k8s = cli.json(
        "targets", "add", "pods", "-m", "kubernetes", "--image", "ghcr.io/acme/agent:1", "--namespace", "loom"
    )
    assert k8s["config"] == {"image": "ghcr.io/acme/agent:1", "namespace": "loom"}


async def test_add_from_file_with_flag_overrides(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "target.yaml"
    spec.write_text(
        "name: from-file\nmechanism: local\nagent_type: copilot\ncapabilities: [docs]\n"
        "config:\n  command: [warp, --quiet]\n  env: {A: '1'}\nmax_concurrent: 4\n"
    )
    created = cli.json("targets", "add", "--from-file", str(spec), "--max-concurrent", "1", "--env", "B=2")
    target = stored(cli, "from-file")
    assert without_health(target) == without_health(created)
    assert target["agent_type"] == "copilot" and target["capabilities"] == ["docs"]
    assert target["max_concurrent"] == 1  # the flag wins over the file
    assert target["config"] == {"command": ["warp", "--quiet"], "env": {"B": "2"}}
    spec_json = tmp_path / "target.json"
    spec_json.write_text(
        json.dumps({"name": "json-one", "mechanism": "webhook", "config": {"url": "https://x.test"}})
    )
    r = cli("targets", "add", "--from-file", str(spec_json), "-q")
    assert r.exit_code == 0 and r.stdout.strip() == stored(cli, "json-one")["id"]


async def test_weft_refusals_are_exit_1_with_its_message(cli: Cli) -> None:
    add_local(cli)
    r = cli("targets", "add", "build-box", "-m", "local", "--command", "x")
    direct = weft(
        cli,
        "POST",
        "/api/targets",
        json={"name": "build-box", "mechanism": "local", "config": {"command": ["x"]}},
    )
    assert direct.status_code >= 400 and r.exit_code == 1
    assert r.stderr == f"shuttle: error: {direct.json()['message']}\n"
    r = cli("targets", "add", "Bad_Name", "-m", "local", "--command", "x")
    assert r.exit_code == 1 and "name" in r.stderr
    r = cli("targets", "show", "missing")
    assert r.stderr == "shuttle: error: target: no target with this id or name in this project\n"
    assert r.exit_code == 1
    r = cli("targets", "update", "missing", "--max-concurrent", "2")
    assert r.exit_code == 1


async def test_list_update_enable_disable_remove(cli: Cli) -> None:
    first = add_local(cli, "alpha")
    add_local(cli, "beta")
    listed = cli.json("targets", "list")
    assert listed["items"] == weft(cli, "GET", "/api/targets").json()["items"]
    assert [t["name"] for t in listed["items"]] == ["alpha", "beta"]
    r = cli("targets", "list")
    assert r.exit_code == 0 and "alpha" in r.stdout and "beta" in r.stdout and "local" in r.stdout
    assert cli("targets", "list", "-q").stdout.split() == [t["id"] for t in listed["items"]]
    updated = cli.json(
        "targets", "update", "alpha", "--max-concurrent", "3", "--env", "EXTRA=1", "--tag", "gpu"
    )
    target = stored(cli, "alpha")
    assert without_health(updated) == without_health(target)
    assert target["max_concurrent"] == 3 and target["tags"] == ["gpu"]
    assert target["config"]["env"] == {"EXTRA": "1"}
    assert target["config"]["command"] == first["config"]["command"]  # the rest of config is kept
    r = cli("targets", "disable", "alpha")
    assert (
        r.exit_code == 0 and "disabled target alpha" in r.stdout and stored(cli, "alpha")["enabled"] is False
    )
    assert cli.json("targets", "enable", first["id"])["enabled"] is True and stored(cli, "alpha")["enabled"]
    r = cli("targets", "show", "alpha")
    assert r.exit_code == 0 and first["id"] in r.stdout
    r = cli("targets", "remove", "alpha", "--yes")
    assert r.exit_code == 0 and "removed target alpha" in r.stdout
    assert weft(cli, "GET", "/api/targets/alpha").status_code == 404
    r = cli("targets", "remove", "alpha", "--yes")
    assert r.exit_code == 1
    r = cli("targets", "remove", "beta", input="n\n")
    assert r.exit_code == 2  # not a terminal: refuses without --yes
    assert weft(cli, "GET", "/api/targets/beta").status_code == 200


async def test_test_and_spin_up_report_what_weft_says(cli: Cli) -> None:
    target = add_local(cli, "runner")
    direct = weft(cli, "POST", "/api/targets/runner/test")
    r = cli("targets", "test", "runner", "--json")
    if direct.status_code == 200:
        assert r.exit_code == (0 if direct.json()["ok"] else 1)
        assert json.loads(r.stdout)["target_id"] == target["id"]
    else:
        assert r.exit_code == 1 and r.stderr == f"shuttle: error: {direct.json()['message']}\n"
    before = weft(cli, "GET", "/api/stats").json()["spinups"]["total"]
    r = cli("spin-up", "runner", "--json")
    if r.exit_code == 0:
        op = json.loads(r.stdout)
        assert op["target_id"] == target["id"] and op["reason"] == "manual"
        assert weft(cli, "GET", "/api/stats").json()["spinups"]["total"] == before + 1
    else:
        assert r.exit_code == 1
        direct = weft(cli, "POST", "/api/targets/runner/spin-up")
        assert direct.status_code >= 400 and r.stderr == f"shuttle: error: {direct.json()['message']}\n"
    r = cli("spin-up", "runner", "--work-id", "not-hex")
    assert r.exit_code == 1 and "work_id" in r.stderr


async def test_mechanisms_come_from_weft_and_an_unknown_one_is_refused_there(cli: Cli) -> None:
    """Shuttle keeps no list of its own: Weft's registry says which mechanisms exist."""
    listed = cli.json("targets", "mechanisms")
    assert [m["name"] for m in listed] == ["local", "ssh", "kubernetes", "github-actions", "webhook"]
    local = next(m for m in listed if m["name"] == "local")
    assert "command" in local["config_schema"]["required"]
    names = cli("targets", "mechanisms", "-q")
    assert names.exit_code == 0 and names.stdout.split() == [m["name"] for m in listed]
    shown = cli("targets", "mechanisms")
    assert shown.exit_code == 0 and "local: command (required)" in shown.stdout
    refused = cli("targets", "add", "t1", "-m", "carrier-pigeon", "--command", "x")
    assert refused.exit_code != 0 and "mechanism: must be one of local, ssh" in refused.stderr
    assert "carrier-pigeon" not in refused.stderr
