"""Shared settings from the environment: NATS (docs/architecture.md, Reaching NATS) and the
fabric-wide LOOM_* variables (Settings)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import AliasChoices, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from shared.errors import LoomError
from shared.settings import (
    DEFAULT_ACK_WAIT_S,
    DEFAULT_REPLICAS,
    NATS_SCHEMES,
    EnvSettings,
    LoomSettings,
    NatsSettings,
    SettingsError,
    load_loom_settings,
    nats_schemes_text,
)


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
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("LOOM_DATA_DIR", raising=False)
    assert LoomSettings().data_home == tmp_path / "home" / ".local" / "share" / "loom"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert LoomSettings().data_home == tmp_path / "xdg" / "loom"
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "explicit"))
    assert LoomSettings().data_home == tmp_path / "explicit"


# -- the fabric-wide LOOM_* variables (shared.settings.LoomSettings) --------------------------------

SHARED_VARIABLES = (
    "LOOM_JS_REPLICAS",
    "LOOM_WORK_ACK_WAIT_S",
    "LOOM_LOG_LEVEL",
    "LOOM_NATS_SERVER",
    "LOOM_DATA_DIR",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*SHARED_VARIABLES, "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_loom_settings_defaults(clean_env: pytest.MonkeyPatch) -> None:
    s = load_loom_settings()
    assert (s.js_replicas, s.work_ack_wait_s, s.log_level, s.nats_server) == (1, 60.0, "INFO", None)
    assert (s.js_replicas, s.work_ack_wait_s) == (DEFAULT_REPLICAS, DEFAULT_ACK_WAIT_S)


@pytest.mark.parametrize(
    ("variable", "raw", "field", "value"),
    [
        ("LOOM_JS_REPLICAS", "3", "js_replicas", 3),
        ("LOOM_JS_REPLICAS", " 5 ", "js_replicas", 5),
        ("LOOM_WORK_ACK_WAIT_S", "2.5", "work_ack_wait_s", 2.5),
        ("LOOM_WORK_ACK_WAIT_S", "86400", "work_ack_wait_s", 86400.0),
        ("LOOM_WORK_ACK_WAIT_S", "", "work_ack_wait_s", 60.0),
        ("LOOM_LOG_LEVEL", "debug", "log_level", "DEBUG"),
        ("LOOM_LOG_LEVEL", " warning ", "log_level", "WARNING"),
        ("LOOM_LOG_LEVEL", "", "log_level", "INFO"),
        ("LOOM_NATS_SERVER", "/opt/nats/nats-server", "nats_server", Path("/opt/nats/nats-server")),
        ("LOOM_NATS_SERVER", "", "nats_server", None),
        ("LOOM_DATA_DIR", "/srv/loom", "data_home", Path("/srv/loom")),
    ],
)
def test_loom_settings_read_each_variable(
    clean_env: pytest.MonkeyPatch, variable: str, raw: str, field: str, value: object
) -> None:
    clean_env.setenv(variable, raw)
    assert getattr(load_loom_settings(), field) == value
    # the same from a given environment (what a launcher checks before starting a part)
    assert getattr(load_loom_settings({variable: raw}), field) == value


@pytest.mark.parametrize(
    ("variable", "raw", "rule"),
    [
        ("LOOM_JS_REPLICAS", "many-s3cr3t", "must be an integer from 1 to 5"),
        ("LOOM_JS_REPLICAS", "0", "must be an integer from 1 to 5"),
        ("LOOM_JS_REPLICAS", "6", "must be an integer from 1 to 5"),
        ("LOOM_JS_REPLICAS", "", "must be an integer from 1 to 5"),  # refused, as before
        ("LOOM_WORK_ACK_WAIT_S", "s3cr3t-token-pasted", "must be a number of seconds from 0.5 to 86400"),
        ("LOOM_WORK_ACK_WAIT_S", "0.1", "must be a number of seconds from 0.5 to 86400"),
        ("LOOM_WORK_ACK_WAIT_S", "nan", "must be a number of seconds from 0.5 to 86400"),
        ("LOOM_LOG_LEVEL", "verbose-s3cr3t", "must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    ],
)
def test_a_bad_loom_variable_is_named_with_its_rule_not_its_value(
    clean_env: pytest.MonkeyPatch, variable: str, raw: str, rule: str
) -> None:
    clean_env.setenv(variable, raw)
    with pytest.raises(SettingsError) as refused:
        load_loom_settings()
    assert isinstance(refused.value, LoomError) and refused.value.code == "invalid"
    assert str(refused.value) == f"{variable}: {rule}"
    with pytest.raises(SettingsError) as given:
        load_loom_settings({variable: raw})
    assert str(given.value) == f"{variable}: {rule}"


def test_every_bad_loom_variable_is_named_at_once(clean_env: pytest.MonkeyPatch) -> None:
    for name, raw in (("LOOM_JS_REPLICAS", "x"), ("LOOM_WORK_ACK_WAIT_S", "y"), ("LOOM_LOG_LEVEL", "z")):
        clean_env.setenv(name, raw)
    with pytest.raises(SettingsError) as refused:
        load_loom_settings()
    assert [p.split(":")[0] for p in str(refused.value).split("; ")] == [
        "LOOM_JS_REPLICAS",
        "LOOM_WORK_ACK_WAIT_S",
        "LOOM_LOG_LEVEL",
    ]


def test_a_given_environment_is_read_alone(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOOM_JS_REPLICAS", "3")
    assert load_loom_settings({}).js_replicas == 1
    assert load_loom_settings().js_replicas == 3


# -- the NATS URL schemes: one list, every check ----------------------------------------------------


def _nats_url_checks() -> dict[str, Callable[[str], object]]:
    from shared.nats.client import parse_url
    from weft.spinup.config import MechanismConfig
    from weft.spinup.settings import SpinupSettings

    return {
        "NATS_URL (settings)": lambda url: NatsSettings(url=url),
        "NATS_URL (connect)": parse_url,
        "WEFT_AGENT_NATS_URL": lambda url: SpinupSettings(agent_nats_url=url),
        "a target's nats_url": lambda url: MechanismConfig(nats_url=url),
    }


@pytest.mark.parametrize("scheme", NATS_SCHEMES)
def test_every_nats_url_check_accepts_each_scheme(scheme: str) -> None:
    for check in _nats_url_checks().values():
        check(f"{scheme}://nats.example:4222")


@pytest.mark.parametrize("scheme", ["http", "https", "redis", "nats+tls"])
def test_every_nats_url_check_refuses_other_schemes_listing_ours(scheme: str) -> None:
    for what, check in _nats_url_checks().items():
        with pytest.raises(Exception) as refused:
            check(f"{scheme}://nats.example:4222")
        assert isinstance(refused.value, ValueError | LoomError), what
        assert "wss://" in str(refused.value) and "nats://" in str(refused.value), what


def test_the_schemes_are_the_four_nats_speaks() -> None:
    assert NATS_SCHEMES == ("nats", "tls", "ws", "wss")
    assert nats_schemes_text() == "nats://, tls://, ws:// or wss://"


PARTS = {"shared", "warp", "weft", "pattern", "shuttle"}


def _settings_classes() -> list[type[BaseSettings]]:
    from pattern.config import PatternSettings
    from shared.settings import IdentitySettings
    from warp.settings import WarpSettings
    from weft.settings import WeftSettings
    from weft.spinup.settings import SpinupSettings

    return [
        LoomSettings,
        NatsSettings,
        IdentitySettings,
        WeftSettings,
        SpinupSettings,
        WarpSettings,
        PatternSettings,
    ]


def _variables(field: FieldInfo) -> set[str]:
    alias = field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []
    return {c.upper() for c in choices if isinstance(c, str)}


def test_every_settings_class_reads_the_environment_one_way() -> None:
    _settings_classes()
    ours = {c for c in BaseSettings.__subclasses__() if c.__module__.split(".")[0] in PARTS}
    assert ours == {EnvSettings}
    assert all(issubclass(c, EnvSettings) for c in _settings_classes())


@pytest.mark.parametrize("cls", _settings_classes(), ids=lambda c: c.__name__)
def test_a_fields_bare_name_in_the_environment_is_never_read(
    cls: type[BaseSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PORT``, ``HOST`` or ``LOG_LEVEL`` belong to other programs: a field is read only
    from its own variable (``WEFT_PORT``), though code may pass it by name (``port=``)."""
    import os

    for name in list(os.environ):
        if name.startswith(("LOOM_", "LOOMINAL_", "WEFT_", "NATS_", "PATTERN_", "MCP_")):
            monkeypatch.delenv(name)
    expected = cls().model_dump()
    bare = {name.upper() for name, field in cls.model_fields.items() if name.upper() not in _variables(field)}
    assert bare  # every class has fields named unlike their variables
    for name in bare:
        monkeypatch.setenv(name, "7")  # a value most fields would take
    assert cls().model_dump() == expected
    named = next(name for name, field in cls.model_fields.items() if _variables(field))
    assert cls(**{named: expected[named]}).model_dump() == expected  # code still passes it by name
