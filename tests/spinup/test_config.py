"""Target config validation: every bad config names the field and the rule."""

from __future__ import annotations

from typing import Any

import pytest

from weft.spinup.config import InvalidTargetConfig
from weft.spinup.mechanisms import parse_config, validate_target_config

SSH_OK: dict[str, Any] = {
    "host": "build-1.internal",
    "username": "loom",
    "command": "claude-agent --fast",
    "key_file": "/etc/loom/id_ed25519",
    "known_hosts": "/etc/loom/known_hosts",
}
K8S_OK: dict[str, Any] = {"image": "ghcr.io/acme/agent:1"}
GH_OK: dict[str, Any] = {"repository": "acme/agents", "workflow": "agent.yml"}
HOOK_OK: dict[str, Any] = {"url": "https://hooks.example.com/spawn"}


def errors_of(mechanism: str, config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidTargetConfig) as caught:
        parse_config(mechanism, config)
    return {e.field: e.message for e in caught.value.errors}


def test_good_configs_normalise() -> None:
    assert validate_target_config("local", {"command": "agent --x 'a b'"}) == {
        "command": ["agent", "--x", "a b"]
    }
    ssh = parse_config("ssh", SSH_OK)
    assert ssh.command == ["claude-agent", "--fast"] and ssh.port == 22 and ssh.host_key_policy == "strict"
    assert parse_config("kubernetes", K8S_OK).job_name_prefix == "loom-agent"
    gh = parse_config("github-actions", GH_OK)
    assert gh.token_env == "GITHUB_TOKEN" and gh.correlation_input == "correlation_id"
    hook = parse_config("webhook", {**HOOK_OK, "success_codes": [204, 200, 200]})
    assert hook.success_codes == [200, 204] and hook.method == "POST"


@pytest.mark.parametrize(
    ("mechanism", "config", "field", "rule"),
    [
        ("local", {}, "config.command", "is required"),
        ("local", {"command": []}, "config.command", "non-empty list"),
        ("local", {"command": "'unbalanced"}, "config.command", "cannot be split"),
        ("local", {"command": ["a"], "cwd": "rel/dir"}, "config.cwd", "absolute path"),
        (
            "local",
            {"command": ["a"], "startup_check_s": -1},
            "config.startup_check_s",
            "greater than or equal",
        ),
        ("local", {"command": ["a"], "env": {"NATS_URL": "x"}}, "config.env", "set by Weft"),
        ("local", {"command": ["a"], "env": {"LOOM_AGENT_ID": "x"}}, "config.env", "set by Weft"),
        ("local", {"command": ["a"], "env": {"1BAD": "x"}}, "config.env", "not an environment variable name"),
        ("local", {"command": ["a"], "nats_url": "http://x"}, "config.nats_url", "nats://, tls://"),
        ("local", {"command": ["a"], "nats_url": "nats://u:p@h:4222"}, "config.nats_url", "credentials"),
        ("local", {"command": ["a"], "shell": True}, "config.shell", "not a setting of this mechanism"),
        ("ssh", {**SSH_OK, "known_hosts": None}, "config.known_hosts", "strict host-key policy"),
        ("ssh", {**SSH_OK, "key_file": None}, "config.key_file", "use_agent"),
        (
            "ssh",
            {**SSH_OK, "host_key_policy": "accept-new", "known_hosts": None},
            "config.known_hosts",
            "accept-new records",
        ),
        ("ssh", {**SSH_OK, "host_key_policy": "trust-all"}, "config.host_key_policy", "'strict'"),
        ("ssh", {**SSH_OK, "port": 70000}, "config.port", "less than or equal"),
        ("ssh", {**SSH_OK, "host": "-oProxyCommand=x"}, "config.host", "host name"),
        ("ssh", {**SSH_OK, "username": "root;rm"}, "config.username", "user name"),
        ("ssh", {**SSH_OK, "host_key": "AAAA"}, "config.host_key", "public key line"),
        ("ssh", {**SSH_OK, "log_file": "relative.log"}, "config.log_file", "absolute remote path"),
        ("ssh", {**SSH_OK, "key_passphrase_env": "has space"}, "config.key_passphrase_env", "upper-case"),
        (
            "github-actions",
            {**GH_OK, "token_env": "ghp_PastedTokenByMistake0123"},
            "config.token_env",
            "upper-case",
        ),
        ("webhook", {**HOOK_OK, "secret_env": "whsec-abc"}, "config.secret_env", "upper-case"),
        (
            "webhook",
            {**HOOK_OK, "headers_env": {"Authorization": "Bearer x"}},
            "config.headers_env",
            "upper-case",
        ),
        ("kubernetes", {}, "config.image", "is required"),
        ("kubernetes", {**K8S_OK, "namespace": "Bad_NS"}, "config.namespace", "Kubernetes name"),
        ("kubernetes", {**K8S_OK, "api_url": "ftp://k8s"}, "config.api_url", "http:// or https://"),
        ("kubernetes", {**K8S_OK, "labels": {"loom.dev/target": "x"}}, "config.labels", "set by Weft"),
        ("kubernetes", {**K8S_OK, "token_env": "A", "token_file": "/t"}, "config.token_env", "not both"),
        ("kubernetes", {**K8S_OK, "image_pull_policy": "Sometimes"}, "config.image_pull_policy", "'Always'"),
        ("github-actions", {"workflow": "a.yml"}, "config.repository", "is required"),
        ("github-actions", {**GH_OK, "repository": "acme"}, "config.repository", "owner/repo"),
        ("github-actions", {**GH_OK, "workflow": "agent.txt"}, "config.workflow", ".yml/.yaml"),
        ("github-actions", {**GH_OK, "ref": "a b"}, "config.ref", "branch or tag"),
        (
            "github-actions",
            {**GH_OK, "inputs": {"x": "{secret}"}},
            "config.inputs",
            "unknown placeholder {secret}",
        ),
        (
            "github-actions",
            {**GH_OK, "api_url": "https://u:p@api.github.com"},
            "config.api_url",
            "credentials",
        ),
        ("webhook", {}, "config.url", "is required"),
        ("webhook", {"url": "ftp://x"}, "config.url", "http:// or https://"),
        ("webhook", {**HOOK_OK, "body": '{"a": "{nope}"}'}, "config.body", "unknown placeholder {nope}"),
        ("webhook", {**HOOK_OK, "method": "TRACE"}, "config.method", "'GET'"),
        ("webhook", {**HOOK_OK, "success_codes": [99]}, "config.success_codes", "HTTP status code"),
        ("webhook", {**HOOK_OK, "success_codes": []}, "config.success_codes", "at least one"),
        ("webhook", {**HOOK_OK, "headers": {"Authorization": "Bearer x"}}, "config.headers", "headers_env"),
        ("webhook", {**HOOK_OK, "headers": {"Bad Header": "x"}}, "config.headers", "not a valid header name"),
        ("webhook", {**HOOK_OK, "headers": {"X-A": "a\r\nX-B: b"}}, "config.headers", "one line"),
        ("webhook", {**HOOK_OK, "timeout_s": 0}, "config.timeout_s", "greater than 0"),
    ],
)
def test_bad_config_names_the_field_and_the_rule(
    mechanism: str, config: dict[str, Any], field: str, rule: str
) -> None:
    errors = errors_of(mechanism, config)
    assert field in errors, errors
    assert rule in errors[field], errors[field]


@pytest.mark.parametrize("key", ["token", "secret", "password", "api_key", "webhook_secret", "private_key"])
def test_secrets_are_refused_in_config_and_never_echoed(key: str) -> None:
    value = "s3cr3t-value-that-must-not-echo"
    with pytest.raises(InvalidTargetConfig) as caught:
        parse_config("webhook", {**HOOK_OK, key: value})
    assert caught.value.errors[0].field == f"config.{key}"
    assert "environment variable" in caught.value.errors[0].message
    assert value not in str(caught.value)


def test_a_token_pasted_where_a_variable_name_belongs_is_refused_without_echo() -> None:
    pasted = "ghp_PastedTokenByMistake0123"
    with pytest.raises(InvalidTargetConfig) as caught:
        parse_config("github-actions", {**GH_OK, "token_env": pasted})
    assert pasted not in str(caught.value)


def test_unknown_mechanism_and_non_object_config() -> None:
    with pytest.raises(InvalidTargetConfig) as caught:
        parse_config("carrier-pigeon", {})
    assert caught.value.errors[0].field == "mechanism"
    with pytest.raises(InvalidTargetConfig) as caught:
        parse_config("local", ["not", "a", "dict"])  # type: ignore[arg-type]
    assert caught.value.errors[0].field == "config"


def test_several_errors_are_all_reported() -> None:
    errors = errors_of("webhook", {"url": "ftp://x", "method": "TRACE", "extra": 1})
    assert set(errors) == {"config.url", "config.method", "config.extra"}


PASTED = "ghp_Zq9TOKEN+sEcReT42"


@pytest.mark.parametrize(
    ("mechanism", "config", "field"),
    [
        ("local", {"command": ["x"], "env": {PASTED: "v"}}, "config.env"),
        ("kubernetes", {**K8S_OK, "labels": {PASTED: "v"}}, "config.labels"),
        ("kubernetes", {**K8S_OK, "labels": {"team": PASTED}}, "config.labels"),
        ("github-actions", {**GH_OK, "inputs": {PASTED: "v"}}, "config.inputs"),
        ("github-actions", {**GH_OK, "inputs": {"x": "{" + "Zq9TOKEN" + "}"}}, "config.inputs"),
        ("webhook", {**HOOK_OK, "headers": {PASTED + " x": "v"}}, "config.headers"),
        ("webhook", {**HOOK_OK, "headers_env": {"X-Key": PASTED}}, "config.headers_env"),
        ("webhook", {**HOOK_OK, "success_codes": [123456]}, "config.success_codes"),
    ],
)
def test_a_bad_key_or_value_inside_a_setting_is_named_not_repeated(
    mechanism: str, config: dict[str, Any], field: str
) -> None:
    """Keys and values inside a setting are the caller's: a token pasted there must not come back."""
    errors = errors_of(mechanism, config)
    assert field in errors, errors
    for text in (*errors, *errors.values()):
        assert "Zq9TOKEN" not in text and "123456" not in text, text
