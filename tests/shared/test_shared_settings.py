"""NATS settings from the environment (docs/architecture.md, Reaching NATS)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.settings import NatsSettings, data_home


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:4222",
        "127.0.0.1:4222",
        "nats:/127.0.0.1",
        "nats://a:4222,https://b:4222",
        "redis://x",
    ],
)
def test_bad_scheme_rejected_naming_nats_url(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError) as direct:
        NatsSettings(url=url)
    assert "NATS_URL" in str(direct.value)
    assert "nats://, tls://, ws://, wss://" in str(direct.value)
    monkeypatch.setenv("NATS_URL", url)
    with pytest.raises(ValidationError) as from_env:
        NatsSettings()
    assert "NATS_URL" in str(from_env.value)


def test_rejected_url_does_not_echo_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", "https://bob:hunter2-secret@nats.example:4222")
    with pytest.raises(ValidationError) as info:
        NatsSettings()
    # what gets printed or logged; .errors() keeps the raw input unless include_input=False
    for text in (str(info.value), repr(info.value), repr(info.value.errors(include_input=False))):
        assert "hunter2-secret" not in text


@pytest.mark.parametrize(
    "url",
    [
        "nats://127.0.0.1:4222",
        "tls://nats.example:4222",
        "ws://127.0.0.1:8080",
        "wss://nats.example",
        "nats://a:1, nats://b:2",
        "nats://user:p%40ss@host:4222",
    ],
)
def test_good_urls_accepted(url: str) -> None:
    assert NatsSettings(url=url).url == url


def test_empty_variables_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Templating (compose, Helm) often leaves NATS_CREDS= behind: that is not the path '.'."""
    for name in ("NATS_URL", "NATS_USER", "NATS_PASS", "NATS_TOKEN", "NATS_CREDS", "NATS_TLS_CA", "NATS_CA"):
        monkeypatch.setenv(name, "")
    s = NatsSettings()
    assert (s.url, s.user, s.password, s.token, s.creds, s.tls_ca, s.tls_cert, s.tls_key) == (None,) * 8
    assert NatsSettings(creds="", tls_ca="", url="").creds is None


def test_all_variables_read_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NATS_URL", "tls://nats.example:4222")
    monkeypatch.setenv("NATS_USER", "bob")
    monkeypatch.setenv("NATS_PASS", "pw-123")
    monkeypatch.setenv("NATS_TOKEN", "tok-456")
    monkeypatch.setenv("NATS_CREDS", str(tmp_path / "user.creds"))
    monkeypatch.setenv("NATS_TLS_CA", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("NATS_TLS_CERT", str(tmp_path / "cert.pem"))
    monkeypatch.setenv("NATS_TLS_KEY", str(tmp_path / "key.pem"))
    s = NatsSettings()
    assert s.url == "tls://nats.example:4222"
    assert s.user == "bob"
    assert s.password is not None and s.password.get_secret_value() == "pw-123"
    assert s.token is not None and s.token.get_secret_value() == "tok-456"
    assert s.creds == tmp_path / "user.creds"
    assert (s.tls_ca, s.tls_cert, s.tls_key) == (
        tmp_path / "ca.pem",
        tmp_path / "cert.pem",
        tmp_path / "key.pem",
    )
    # secrets stay out of reprs
    assert "pw-123" not in repr(s) and "tok-456" not in repr(s)


def test_short_tls_aliases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NATS_CA", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("NATS_CERT", str(tmp_path / "c.pem"))
    monkeypatch.setenv("NATS_KEY", str(tmp_path / "k.pem"))
    s = NatsSettings()
    assert (s.tls_ca, s.tls_cert, s.tls_key) == (tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "k.pem")


def test_constructor_names_work_alongside_env(tmp_path: Path) -> None:
    s = NatsSettings(tls_ca=tmp_path / "ca.pem", user="u", password="p")
    assert s.tls_ca == tmp_path / "ca.pem"
    assert s.password is not None and s.password.get_secret_value() == "p"


def test_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_home() == tmp_path / "home" / ".local" / "share" / "loom"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_home() == tmp_path / "xdg" / "loom"
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "explicit"))
    assert data_home() == tmp_path / "explicit"
