"""Pieces of Pattern that need no NATS: keys, secret scanner, settings, index, inputs, paths."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pattern_helpers import new_agent_id, new_user_id
from pydantic import ValidationError

from pattern.config import PatternConfig, PatternConfigError, SecretScanMode, load_settings
from pattern.errors import InvalidInputError
from pattern.index import MemoryIndex
from pattern.inputs import (
    CoreMemoryInput,
    ExportInput,
    ImportInput,
    RecallInput,
    RememberInput,
)
from pattern.keys import BucketNames, memory_key, parse_key
from pattern.models import Category, MemoryRecord, Scope
from pattern.recall import summarize
from pattern.results import MemoryView, RecallCounts
from pattern.tools import TOOLS
from pattern.transfer import resolve_in
from shared.mcp.tools import describe_validation
from shared.secretscan import scan
from shared.settings import LoomSettings

AGENT = new_agent_id()


def record(**kw: object) -> MemoryRecord:
    base: dict[str, object] = {
        "scope": Scope.PRIVATE,
        "category": Category.RECENT,
        "content": "hello",
        "agent_id": AGENT,
        "project_id": "t-unit",
        "user_id": new_user_id(),
    }
    base.update(kw)
    return MemoryRecord.model_validate(base)


# -- keys -------------------------------------------------------------------------------


def test_key_round_trip() -> None:
    key = memory_key(Scope.TEAM, AGENT, Category.DECISIONS, "f" * 32)
    assert key == f"team.{AGENT}.decisions.{'f' * 32}"
    parts = parse_key(key)
    assert parts is not None
    assert (parts.scope, parts.owner, parts.category, parts.id) == (
        Scope.TEAM,
        AGENT,
        Category.DECISIONS,
        "f" * 32,
    )


@pytest.mark.parametrize(
    "key",
    [
        f"secret.{AGENT}.recent.{'f' * 32}",
        f"team.{AGENT}.gossip.{'f' * 32}",
        f"team.{AGENT[:-1]}.recent.{'f' * 32}",
        f"team.{AGENT}.recent.{'F' * 32}",
        f"team.{AGENT}.recent.{'f' * 32}.extra",
        "anything",
    ],
    # AGENT is random per process: ids of their own keep the test ids the same in every
    # pytest-xdist worker (which must all collect the same tests)
    ids=["secret-scope", "unknown-category", "short-owner", "upper-case-id", "extra-part", "no-dots"],
)
def test_foreign_keys_are_not_memories(key: str) -> None:
    assert parse_key(key) is None


def test_buckets_per_scope() -> None:
    user = new_user_id()
    names = BucketNames.for_identity("t-unit", user)
    assert names.for_scope(Scope.PRIVATE) == names.for_scope(Scope.TEAM) == names.project
    assert "t-unit" in names.project
    assert user in names.for_scope(Scope.PERSONAL)
    assert names.for_scope(Scope.PUBLIC) == names.public


# -- secret scanner ---------------------------------------------------------------------

SECRETS = {
    "private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
    "AWS access key id": "key AKIAIOSFODNN7EXAMPLE here",
    "GitHub token": "ghp_" + "x" * 36,
    "Slack token": "xoxb-1234567890-abcdefghij",
    "API key (sk-…)": "sk-ant-" + "a" * 30,
    "Stripe key": "sk_live_" + "a" * 24,
    "Google API key": "AIza" + "b" * 35,
    "NATS nkey seed": "SU" + "A" * 56,
    "JSON web token": "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
    "connection string with credentials": "mongodb://root:s3cret@db.internal:27017/app",
    "bearer token": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123",
    "password or token assignment": 'DB_PASSWORD = "correct-horse-battery"',
}


@pytest.mark.parametrize(("kind", "text"), SECRETS.items())
def test_scanner_finds(kind: str, text: str) -> None:
    found = scan("prefix " + text)
    assert kind in [f.kind for f in found]
    first = next(f for f in found if f.kind == kind)
    assert first.offset >= len("prefix ")
    warning = first.warning()
    assert warning.startswith("content: possible") and text not in warning


@pytest.mark.parametrize(
    "text",
    [
        "We chose PostgreSQL because of JSONB support; see docs/adr/0003.md.",
        "password: <set in vault>",
        "token=${GITHUB_TOKEN}",
        "https://example.com/path?q=1",
        "the skeleton key idea",
    ],
)
def test_scanner_leaves_ordinary_text(text: str) -> None:
    assert scan(text) == []


# -- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        ("0", SecretScanMode.OFF),
        ("off", SecretScanMode.OFF),
        ("1", SecretScanMode.WARN),
        ("BLOCK", SecretScanMode.BLOCK),
    ],
)
def test_secret_scan_setting(monkeypatch: pytest.MonkeyPatch, raw: str, mode: SecretScanMode) -> None:
    monkeypatch.setenv("PATTERN_SECRET_SCAN", raw)
    assert load_settings().secret_scan is mode


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("PATTERN_SECRET_SCAN", "maybe"),
        ("PATTERN_SHORT_TTL_S", "0"),
        ("PATTERN_EXPIRED_WINDOW_S", "5"),
        ("PATTERN_READY_WAIT_S", "-1"),
    ],
)
def test_bad_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(PatternConfigError) as err:
        load_settings()
    assert var in str(err.value)


def test_config_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATTERN_SHORT_TTL_S", "3")
    monkeypatch.setenv("PATTERN_EXPORT_DIR", str(tmp_path / "x"))
    monkeypatch.setenv("PATTERN_READY_WAIT_S", "2.5")
    config = PatternConfig.from_env()
    assert config.temporary_ttl_s == 3 and config.ready_wait_s == 2.5
    assert config.export_root(Path("/elsewhere")) == tmp_path / "x"
    monkeypatch.delenv("PATTERN_EXPORT_DIR")
    monkeypatch.delenv("PATTERN_SHORT_TTL_S")
    config = PatternConfig.from_env()
    assert config.temporary_ttl_s == 24 * 3600
    assert config.export_root(tmp_path) == tmp_path / ".loom" / "memory-exports"


def test_config_takes_the_shared_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_JS_REPLICAS", "3")
    assert PatternConfig.from_env().replicas == 3
    # warp --with-memory: Warp's start-up read them already; they are not read again
    monkeypatch.setenv("LOOM_JS_REPLICAS", "many")
    assert PatternConfig.from_env(LoomSettings(js_replicas=2)).replicas == 2
    with pytest.raises(PatternConfigError) as err:
        PatternConfig.from_env()
    assert str(err.value) == "LOOM_JS_REPLICAS: must be an integer from 1 to 5"


@pytest.mark.parametrize(
    ("variable", "rule"),
    [
        ("LOOM_JS_REPLICAS", "must be an integer from 1 to 5"),
        ("LOOM_LOG_LEVEL", "must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    ],
)
def test_pattern_refuses_a_bad_shared_setting_at_start(tmp_path: Path, variable: str, rule: str) -> None:
    secret = "ghp_Zq9TOKEN+sEcReT/42xYwVb="
    env = {"HOME": str(tmp_path), "LOOM_PROJECT_PATH": str(tmp_path), variable: secret}
    pattern = str(Path(sys.executable).parent / "pattern")
    done = subprocess.run(
        [pattern], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip() == f"pattern: {variable}: {rule}"


# -- index ------------------------------------------------------------------------------


def test_index_ignores_stale_revisions() -> None:
    index = MemoryIndex()
    r = record()
    key = memory_key(r.scope, r.agent_id, r.category, r.id)
    assert index.put("b", key, r, 5)
    assert not index.put("b", key, r.model_copy(update={"content": "older"}), 4)
    assert index.get(r.id)[0].record.content == "hello"
    assert not index.remove("b", key, 3)
    assert index.remove("b", key, 6)
    assert index.get(r.id) == []
    assert not index.put("b", key, r, 5)  # a replay of the value the delete superseded


def test_index_rejects_key_value_mismatch() -> None:
    index = MemoryIndex()
    r = record()
    wrong = memory_key(Scope.TEAM, r.agent_id, r.category, r.id)
    assert not index.put("b", wrong, r, 1)
    assert len(index) == 0


def test_index_expiry_and_window() -> None:
    index = MemoryIndex(expired_window_s=60)
    now = datetime.now(UTC)
    r = record(expires_at=now + timedelta(seconds=10))
    index.put("b", memory_key(r.scope, r.agent_id, r.category, r.id), r, 1)
    assert index.expire(now) == 0 and len(index) == 1
    assert index.expire(now + timedelta(seconds=11)) == 1 and len(index) == 0
    assert sum(index.expired_counts().values()) == 1
    index.expire(now + timedelta(seconds=200))
    assert sum(index.expired_counts().values()) == 0


def test_index_walk_order() -> None:
    index = MemoryIndex()
    base = datetime.now(UTC)
    made = []
    for i, cat in enumerate(
        [Category.TASKS, Category.RECENT, Category.LEARNINGS, Category.DECISIONS, Category.CORE]
    ):
        r = record(category=cat, updated_at=base + timedelta(seconds=i))
        index.put("b", memory_key(r.scope, r.agent_id, r.category, r.id), r, i + 1)
        made.append(cat)
    order = [e.record.category for e in index.walk(list(Scope), list(Category))]
    assert order == [Category.CORE, Category.DECISIONS, Category.LEARNINGS, Category.RECENT, Category.TASKS]


# -- summary ----------------------------------------------------------------------------


def test_summary_when_nothing_matched() -> None:
    counts = RecallCounts(
        returned=0,
        has_more=False,
        visible=3,
        by_category={},
        by_scope={},
        expired_recently=2,
        expired_window_s=3600,
    )
    text = summarize([], counts, 4096)
    assert "Nothing matched" in text and "2 expired recently" in text


def test_summary_respects_byte_cap_with_multibyte_text() -> None:
    views = [MemoryView.of(record(content="日本語のメモ " * 100), AGENT) for _ in range(40)]
    counts = RecallCounts(
        returned=40,
        has_more=True,
        visible=99,
        by_category={},
        by_scope={},
        expired_recently=0,
        expired_window_s=3600,
    )
    for cap in (200, 1000, 4096):
        text = summarize(views, counts, cap)
        assert len(text.encode("utf-8")) <= cap
    assert "more in the structured result" in summarize(views, counts, 4096)


# -- inputs -----------------------------------------------------------------------------


def test_input_rules_name_their_field() -> None:
    cases = [
        (lambda: RememberInput(content="x", category=Category.CORE, scope=Scope.TEAM), "scope"),
        (lambda: RememberInput(content="x", tags=["bad tag"]), "tags"),
        (lambda: RememberInput(content="x", metadata={"bad key!": "v"}), "metadata"),
        (lambda: RememberInput(content="x", surprise=1), "surprise"),
        (lambda: CoreMemoryInput(content="x", scope="public"), "scope"),
        (
            lambda: RecallInput(created_after=datetime(2025, 2, 1), created_before=datetime(2025, 1, 1)),
            "created_after",
        ),
        (lambda: RecallInput(search=""), "search"),
        (lambda: ExportInput(path="notes.txt"), "path"),
        (lambda: ImportInput(path="/abs/file.json"), "path"),
    ]
    for build, field in cases:
        with pytest.raises(ValidationError) as err:
            build()
        assert field in describe_validation(err.value), field


def test_inputs_normalise() -> None:
    req = RememberInput(content="x", tags=["DB", "db", "Api"])
    assert req.tags == ["db", "api"]
    naive = RecallInput(created_after=datetime(2025, 1, 1, 12, 0))
    assert naive.created_after is not None and naive.created_after.tzinfo is UTC


def test_tool_signatures_mirror_the_models() -> None:
    for spec in TOOLS:
        sig, model = spec.signature, spec.model
        assert sig is not None and model is not None, spec.name
        assert list(sig.parameters) == list(model.model_fields), spec.name
        for name, param in sig.parameters.items():
            field = model.model_fields[name]
            assert (param.default is inspect.Parameter.empty) == field.is_required(), (spec.name, name)


# -- export paths -----------------------------------------------------------------------


def test_paths_stay_in_the_export_directory(tmp_path: Path) -> None:
    root = tmp_path / "exports"
    root.mkdir()
    assert resolve_in(root, "a/b.json") == (root / "a" / "b.json").resolve()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "link")
    for bad in ("../x.json", "/etc/x.json", "link/x.json", "."):
        with pytest.raises(InvalidInputError) as err:
            resolve_in(root, bad)
        assert str(err.value).startswith("path:")
