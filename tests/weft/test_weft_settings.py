"""WeftSettings from the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from pydantic import ValidationError

from shared.identity import project_id_for_path
from shared.settings import LoomSettings
from weft.banner import render_banner
from weft.metrics import Metrics
from weft.project.hub import ProjectHub
from weft.runtime import start_embedded
from weft.settings import WeftSettings
from weft.state import NatsInfo


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WEFT_HOST", "0.0.0.0")
    monkeypatch.setenv("WEFT_PORT", "9000")
    monkeypatch.setenv("WEFT_API_TOKENS", " tok-alpha , tok-beta,,tok-gamma ")
    monkeypatch.setenv("WEFT_BOUNDARY_POLICY", str(tmp_path / "p.yaml"))
    monkeypatch.setenv("LOOM_PROJECT_ID", "from-identity")
    monkeypatch.setenv("NATS_URL", "nats://user:pw@example.com:4222")
    settings = WeftSettings()
    assert (settings.host, settings.port) == ("0.0.0.0", 9000)
    secrets = [t.secret.get_secret_value() for t in settings.api_tokens]
    assert secrets == ["tok-alpha", "tok-beta", "tok-gamma"]
    assert settings.auth_enabled and "tok-alpha" not in repr(settings)
    assert settings.policy_file == tmp_path / "p.yaml"
    assert settings.project_id == "from-identity"
    assert settings.nats.url == "nats://user:pw@example.com:4222"
    monkeypatch.setenv("WEFT_PROJECT_ID", "explicit")
    monkeypatch.setenv("WEFT_POLICY_FILE", str(tmp_path / "q.json"))
    settings = WeftSettings()
    assert settings.project_id == "explicit" and settings.policy_file == tmp_path / "q.json"


def test_default_project_is_the_path_hash(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOOM_PROJECT_PATH", str(tmp_path))
    assert WeftSettings().project_id == project_id_for_path(tmp_path)
    assert not WeftSettings().auth_enabled


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("WEFT_PROJECT_ID", "Not Valid", "WEFT_PROJECT_ID"),
        ("WEFT_PORT", "70000", "65535"),
        ("WEFT_LOG_LEVEL", "chatty", "WEFT_LOG_LEVEL"),
        ("WEFT_SWEEP_INTERVAL_S", "0", "greater than 0"),
        ("WEFT_WORK_RETENTION_S", "-1", "greater than or equal to 0"),
        ("WEFT_WORK_RETENTION_S", "a week", "WEFT_WORK_RETENTION_S"),
        ("WEFT_AGENT_RETENTION_S", "-5", "WEFT_AGENT_RETENTION_S"),
    ],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, words: str
) -> None:
    monkeypatch.setenv("LOOM_PROJECT_ID", "p")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as caught:
        WeftSettings()
    assert words in str(caught.value)


@pytest.mark.parametrize("value", ["sometimes-secret", "10 s", "0ms", "1.5s"])
def test_bad_nats_sync_names_the_variable_and_rule_not_the_value(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("LOOM_PROJECT_ID", "p")
    monkeypatch.setenv("LOOM_NATS_SYNC", value)
    with pytest.raises(ValidationError) as caught:
        WeftSettings()
    text = str(caught.value)
    assert "LOOM_NATS_SYNC must be 'always' (fsync every write) or a whole number with a unit ms," in text
    assert value not in text


def test_bundled_nats_syncs_every_write_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_PROJECT_ID", "p")
    assert WeftSettings().nats_sync == "always"
    monkeypatch.setenv("LOOM_NATS_SYNC", "")  # empty: unset
    assert WeftSettings().nats_sync == "always"
    monkeypatch.setenv("LOOM_NATS_SYNC", "2m")
    assert WeftSettings().nats_sync == "2m"


@pytest.mark.parametrize("value", [None, "250ms"])
async def test_start_embedded_passes_the_sync_setting_to_the_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "data"))
    if value is not None:
        monkeypatch.setenv("LOOM_NATS_SYNC", value)
    settings = WeftSettings(project_id="p", nats_port=-1, nats_ws_port=-1)  # type: ignore[call-arg]
    server = await start_embedded(settings)
    try:
        assert server.running and server.config.sync_interval == (value or "always")
        assert server._workdir is not None
        conf = (server._workdir / "nats.conf").read_text()
        assert f'sync_interval: "{value or "always"}"' in conf
    finally:
        server.stop()


def test_banner_never_shows_credentials() -> None:
    settings = WeftSettings(project_id="demo", port=8080, api_tokens="secret-token-1")  # type: ignore[arg-type]
    text = render_banner(settings, NatsInfo(url="nats://127.0.0.1:4222", embedded=True, store_dir="/d"), None)
    assert "secret-token-1" not in text
    assert (
        "http://127.0.0.1:8080/api" in text
        and "LOOM_PROJECT_ID=demo" in text
        and "bearer token required" in text
    )


def test_the_banners_attach_lines_give_the_agent_capabilities() -> None:
    """An agent attached from the banner must be able to claim the README's work: without
    LOOM_CAPABILITIES it registers and claims nothing, and submit --wait waits for ever."""
    text = render_banner(
        WeftSettings(project_id="demo"), NatsInfo(url="nats://127.0.0.1:4222", embedded=False), None
    )
    add_line = next(line for line in text.splitlines() if "claude mcp add warp" in line)
    assert "-e LOOM_CAPABILITIES=code,review " in add_line and add_line.index("--") > add_line.index("CAPAB")
    start = text.index("{", text.index("(.mcp.json)"))
    snippet = json.loads(text[start : text.index("\n\n", start)])
    env = snippet["mcpServers"]["warp"]["env"]
    assert env == {
        "NATS_URL": "nats://127.0.0.1:4222",
        "LOOM_PROJECT_ID": "demo",
        "LOOM_CAPABILITIES": "code,review",
    }


def test_the_shared_loom_variables_are_read_once_and_passed_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_JS_REPLICAS", "3")
    monkeypatch.setenv("LOOM_WORK_ACK_WAIT_S", "2.5")
    monkeypatch.setenv("LOOM_DATA_DIR", "/srv/loom-data")
    loom = WeftSettings(project_id="p").loom
    assert (loom.js_replicas, loom.work_ack_wait_s, loom.data_home) == (3, 2.5, Path("/srv/loom-data"))
    monkeypatch.setenv("LOOM_JS_REPLICAS", "ghp_Zq9TOKEN+sEcReT42")
    with pytest.raises(ValidationError) as refused:
        WeftSettings(project_id="p")
    assert "LOOM_JS_REPLICAS" in str(refused.value) and "Zq9TOKEN" not in str(refused.value)


async def test_each_projects_work_queue_gets_the_ack_wait(nc: NatsClient, project_id: str) -> None:
    settings = WeftSettings(project_id=project_id, loom=LoomSettings(work_ack_wait_s=2.5))
    hub = ProjectHub(nc, settings, Metrics(), None)
    try:
        assert (await hub.get(project_id)).queue.ack_wait_s == 2.5
    finally:
        await hub.close()
