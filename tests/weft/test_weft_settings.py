"""WeftSettings from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.identity import project_id_for_path
from weft.banner import render_banner
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
    assert [t.get_secret_value() for t in settings.api_tokens] == ["tok-alpha", "tok-beta", "tok-gamma"]
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


def test_banner_never_shows_credentials() -> None:
    settings = WeftSettings(project_id="demo", port=8080, api_tokens="secret-token-1")  # type: ignore[arg-type]
    text = render_banner(settings, NatsInfo(url="nats://127.0.0.1:4222", embedded=True, store_dir="/d"), None)
    assert "secret-token-1" not in text
    assert (
        "http://127.0.0.1:8080/api" in text
        and "LOOM_PROJECT_ID=demo" in text
        and "bearer token required" in text
    )
