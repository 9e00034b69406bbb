"""Export and import over a real nats-server: round trip, re-homing, every refusal."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pattern_helpers import eventually, make_identity, new_user_id

from pattern.config import PatternConfig, PatternLimits, SecretScanMode
from pattern.errors import InvalidInputError
from pattern.inputs import ExportInput, ImportInput, RecallInput, RememberInput
from pattern.models import Category, Scope, utcnow
from pattern.service import MemoryService


def write(root: Path, name: str, document: Any) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(document if isinstance(document, str) else json.dumps(document))


def doc(*memories: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"format": "loom-pattern-memories", "version": 1, "memories": list(memories), **top}


async def test_round_trip_to_another_agent(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    cfg = PatternConfig(export_dir=tmp_path / "shared-exports")
    a = await make_service(make_identity(project_id, project_path), cfg)
    await a.remember(
        RememberInput(
            content="alpha", category=Category.LONGTERM, tags=["x"], priority=9, metadata={"k": "v"}
        )
    )
    await a.remember(RememberInput(content="beta", scope=Scope.PERSONAL, category=Category.ARCHITECTURE))
    await a.remember(RememberInput(content="gamma", scope=Scope.TEAM, category=Category.DECISIONS))
    exported = await a.export_memories(ExportInput(path="sub/all.json"))
    assert exported.count == 3 and exported.version == 1
    assert Path(exported.path) == (tmp_path / "shared-exports" / "sub" / "all.json").resolve()
    data = json.loads(Path(exported.path).read_bytes())  # noqa: ASYNC240
    assert data["format"] == "loom-pattern-memories" and data["exported_by"]["agent_id"] == a.agent_id

    only_team = await a.export_memories(ExportInput(path="team.json", scopes=[Scope.TEAM]))
    assert only_team.count == 1
    only_longterm = await a.export_memories(ExportInput(path="lt.json", categories=[Category.LONGTERM]))
    assert only_longterm.count == 1
    restored = await a.import_memories(ImportInput(path="sub/all.json"))
    assert restored.imported == 0 and all("already present" in s.reason for s in restored.skipped)
    default_name = await a.export_memories(ExportInput())
    assert Path(default_name.path).name.startswith(f"memories-{a.agent_id[:12]}")

    b_identity = make_identity(f"{project_id}-b", project_path)
    b = await make_service(b_identity, cfg)
    result = await b.import_memories(ImportInput(path="sub/all.json"))
    assert result.imported == 3 and result.skipped == []
    assert "another agent" in result.warnings[0]
    got = await b.recall_context(RecallInput())
    by_content = {m.content: m for m in got.memories}
    assert set(by_content) == {"alpha", "beta", "gamma"}
    alpha = by_content["alpha"]
    assert alpha.own and alpha.agent_id == b.agent_id and alpha.project_id == b_identity.project_id
    assert (alpha.category, alpha.tags, alpha.priority, alpha.metadata) == (
        Category.LONGTERM,
        ["x"],
        9,
        {"k": "v"},
    )
    assert by_content["beta"].scope is Scope.PERSONAL
    assert by_content["gamma"].scope is Scope.TEAM and by_content["gamma"].project_id == b_identity.project_id
    # B's personal copy went to B's user bucket, not A's.
    assert b.buckets.user != a.buckets.user
    assert by_content["beta"].id not in {e.record.id for e in a.index.entries()}


async def test_export_contains_only_own_memories(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    b = await make_service(make_identity(project_id, project_path))
    theirs = (await b.remember(RememberInput(content="b's team note", scope=Scope.TEAM))).memory
    await eventually(lambda: a.index.get(theirs.id))
    await a.remember(RememberInput(content="mine"))
    exported = await a.export_memories(ExportInput(path="mine.json"))
    data = json.loads(Path(exported.path).read_bytes())  # noqa: ASYNC240
    assert [m["content"] for m in data["memories"]] == ["mine"]


async def test_import_refusals(make_service, project_id: str, project_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "exports"
    a: MemoryService = await make_service(make_identity(project_id, project_path))
    write(root, "broken.json", "{not json")
    write(root, "list.json", [1, 2])
    write(root, "format.json", {"format": "other", "version": 1, "memories": []})
    write(root, "version.json", {"format": "loom-pattern-memories", "version": 99, "memories": []})
    write(root, "memories.json", {"format": "loom-pattern-memories", "version": 1, "memories": {}})
    cases = {
        "missing.json": (InvalidInputError, "no such file"),
        "broken.json": (InvalidInputError, "not valid JSON"),
        "list.json": (InvalidInputError, "JSON object"),
        "format.json": (InvalidInputError, "format"),
        "version.json": (InvalidInputError, "version must be 1"),
        "memories.json": (InvalidInputError, "memories must be a list"),
        "../escape.json": (InvalidInputError, "export directory"),
    }
    for path, (error, words) in cases.items():
        with pytest.raises(error) as err:
            await a.import_memories(ImportInput(path=path))
        assert str(err.value).startswith("path:") and words in str(err.value), path
        assert path not in str(err.value) and "other" not in str(err.value)  # the input is not repeated

    small = await make_service(
        make_identity(project_id, project_path),
        PatternConfig(export_dir=root, limits=PatternLimits(max_import_bytes=50)),
    )
    write(root, "big.json", doc({"scope": "private", "category": "longterm", "content": "x" * 100}))
    with pytest.raises(InvalidInputError) as err:
        await small.import_memories(ImportInput(path="big.json"))
    assert "limited to 50 bytes" in str(err.value)


async def test_import_validates_each_record(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "exports"
    cfg = PatternConfig(export_dir=root, limits=PatternLimits(max_core_per_agent=1))
    a = await make_service(make_identity(project_id, project_path), cfg)
    now = utcnow()
    write(
        root,
        "mixed.json",
        doc(
            {"id": "1" * 32, "scope": "private", "category": "longterm", "content": "good"},
            {
                "id": "2" * 32,
                "scope": "private",
                "category": "recent",
                "content": "stale",
                "expires_at": (now - timedelta(hours=1)).isoformat(),
            },
            {
                "id": "3" * 32,
                "scope": "private",
                "category": "recent",
                "content": "fresh",
                "expires_at": (now + timedelta(hours=1)).isoformat(),
            },
            {"id": "4" * 32, "scope": "team", "category": "core", "content": "core in team"},
            {"id": "5" * 32, "scope": "private", "category": "core", "content": "core one"},
            {"id": "6" * 32, "scope": "private", "category": "core", "content": "core two"},
            {
                "id": "7" * 32,
                "scope": "private",
                "category": "longterm",
                "content": "x",
                "tags": ["no spaces allowed"],
            },
            "not an object",
            {"id": "8" * 32, "scope": "private", "category": "recent", "content": "no expiry given"},
        ),
    )
    dry = await a.import_memories(ImportInput(path="mixed.json", dry_run=True))
    assert dry.dry_run and dry.imported == 4
    assert (await a.recall_context(RecallInput())).memories == []

    result = await a.import_memories(ImportInput(path="mixed.json"))
    reasons = {s.index: s.reason for s in result.skipped}
    assert set(reasons) == {1, 3, 5, 6, 7}
    assert reasons[1].startswith("expires_at: expired")
    assert "scope" in reasons[3]
    assert "core memories" in reasons[5] and "limit is 1" in reasons[5]
    assert reasons[6].startswith("tags.0")
    assert result.imported == 4
    got = {m.content: m for m in (await a.recall_context(RecallInput())).memories}
    assert set(got) == {"good", "fresh", "core one", "no expiry given"}
    fresh = got["fresh"]
    assert fresh.expires_at is not None and fresh.expires_at <= now + timedelta(hours=1, seconds=1)
    assert got["no expiry given"].expires_at is not None


async def test_import_secret_handling(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "exports"
    write(
        root,
        "leaky.json",
        doc(
            {"id": "1" * 32, "scope": "private", "category": "longterm", "content": "ok"},
            {
                "id": "2" * 32,
                "scope": "private",
                "category": "longterm",
                "content": "key AKIAIOSFODNN7EXAMPLE",
            },
        ),
    )
    warn = await make_service(make_identity(project_id, project_path), PatternConfig(export_dir=root))
    res = await warn.import_memories(ImportInput(path="leaky.json"))
    assert res.imported == 2 and any(w.startswith("memories.1.content: possible AWS") for w in res.warnings)
    block = await make_service(
        make_identity(project_id, project_path),
        PatternConfig(export_dir=root, secret_scan=SecretScanMode.BLOCK),
    )
    res = await block.import_memories(ImportInput(path="leaky.json"))
    assert res.imported == 1 and res.skipped[0].index == 1 and "secret" in res.skipped[0].reason


async def test_personal_import_lands_in_own_user_bucket(
    make_service, project_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "exports"
    write(
        root,
        "p.json",
        doc({"id": "9" * 32, "scope": "personal", "category": "longterm", "content": "mine now"}),
    )
    user = new_user_id()
    importer = await make_service(make_identity("t-imp-" + new_user_id(), project_path, user_id=user))
    await importer.import_memories(ImportInput(path="p.json"))
    same_user_elsewhere = await make_service(
        make_identity("t-imp2-" + new_user_id(), project_path, user_id=user)
    )
    other_user = await make_service(make_identity("t-imp3-" + new_user_id(), project_path))
    assert [m.content for m in (await same_user_elsewhere.recall_context(RecallInput())).memories] == [
        "mine now"
    ]
    assert (await other_user.recall_context(RecallInput(scopes=[Scope.PERSONAL]))).memories == []
