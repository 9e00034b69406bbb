"""Client-side submission checks (shuttle.validate)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shuttle import validate as v
from shuttle.errors import UsageError

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("30m", timedelta(minutes=30)),
        ("+2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("90s", timedelta(seconds=90)),
    ],
)
def test_relative_deadlines(text: str, delta: timedelta) -> None:
    assert datetime.fromisoformat(v.deadline(text, NOW)) == NOW + delta


def test_absolute_deadlines_need_a_timezone() -> None:
    assert v.deadline("2030-01-01T10:00:00Z") == "2030-01-01T10:00:00+00:00"
    assert v.deadline(datetime(2030, 1, 1, tzinfo=UTC)) == "2030-01-01T00:00:00+00:00"
    for bad in ("2030-01-01T10:00:00", datetime(2030, 1, 1)):
        with pytest.raises(v.Invalid, match="deadline: must include a timezone"):
            v.deadline(bad)
    with pytest.raises(v.Invalid, match="a duration must be more than zero"):
        v.deadline("0m")


def test_context_from_text_and_file(tmp_path: Path) -> None:
    assert v.context('{"a": 1}') == {"a": 1}
    path = tmp_path / "ctx.json"
    path.write_text('{"repo": "acme/app"}')
    assert v.context(f"@{path}") == {"repo": "acme/app"}
    with pytest.raises(v.Invalid, match="context: cannot read"):
        v.context(f"@{tmp_path / 'missing.json'}")


def test_submission_fills_task_id_and_drops_nones() -> None:
    clean = v.submission({"description": "x", "capability": "code", "deadline": None})
    assert clean["task_id"].startswith("shuttle-") and "deadline" not in clean
    with pytest.raises(UsageError, match="task_id: must be a string of 1-200 characters"):
        v.submission({"description": "x", "capability": "code", "task_id": "x" * 201})
    with pytest.raises(UsageError, match="description: must be non-empty"):
        v.submission({"description": "   ", "capability": "code"})
    with pytest.raises(UsageError, match="max_attempts: must be an integer from 1 to 100"):
        v.submission({"description": "x", "capability": "code", "max_attempts": True})


def test_batch_shapes(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text('{"description": "x", "capability": "code"}')
    assert len(v.load_batch(str(one))) == 1
    wrapped = tmp_path / "wrapped.yml"
    wrapped.write_text(
        "items:\n  - {description: a, capability: code}\n  - {description: b, capability: test}\n"
    )
    assert [s["capability"] for s in v.load_batch(str(wrapped))] == ["code", "test"]
