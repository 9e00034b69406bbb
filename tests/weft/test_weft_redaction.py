"""Which parts of a target's config are shown and which are masked."""

from __future__ import annotations

from shared.redact import MASK
from weft.targets.redaction import merge_masked, redact_config


def test_secrets_masked_variable_names_shown() -> None:
    config = {
        "token": "ghp_abc123",
        "webhook_secret": "s3cr3t",
        "token_env": "GITHUB_TOKEN",
        "headers_env": {"Authorization": "HOOK_AUTH"},
        "url": "https://user:pw@hooks.example/x",
        "nested": {"api_key": "k", "name": "ok"},
    }
    shown = redact_config(config)
    assert shown["token"] == MASK and shown["webhook_secret"] == MASK
    assert shown["nested"] == {"api_key": MASK, "name": "ok"}
    assert shown["token_env"] == "GITHUB_TOKEN"
    assert shown["headers_env"] == {"Authorization": "HOOK_AUTH"}
    assert "pw" not in shown["url"] and "hooks.example" in shown["url"]


def test_masked_values_sent_back_keep_the_stored_secret() -> None:
    stored = {"token": "ghp_abc123", "repo": "a/b"}
    assert merge_masked({"token": MASK, "repo": "c/d"}, stored) == {"token": "ghp_abc123", "repo": "c/d"}
