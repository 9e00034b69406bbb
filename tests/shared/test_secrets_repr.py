"""Settings objects never show credentials when printed or logged."""

from __future__ import annotations

from shared.settings import NatsSettings


def test_repr_hides_url_credentials_and_secrets() -> None:
    settings = NatsSettings.model_validate(
        {"NATS_URL": "nats://loom:hunter2@nats.example:4222", "NATS_PASS": "pa55", "NATS_TOKEN": "tok-123"}
    )
    shown = repr(settings) + str(settings)
    assert "hunter2" not in shown and "pa55" not in shown and "tok-123" not in shown
    assert "nats.example:4222" in shown
    assert settings.url == "nats://loom:hunter2@nats.example:4222"  # the value itself is intact
