"""Artifacts an agent hands back (shared/work/artifacts.py): each kind of part, each rule a
part breaks named by its field without the value, and the size a record may hold."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import ValidationError

from shared.artifacts import MAX_ARTIFACTS_BYTES, MAX_FILE_BYTES, FilePart, WorkArtifact, check_size
from shared.errors import Invalid, validation_problems


def artifact(*parts: dict[str, Any]) -> WorkArtifact:
    return WorkArtifact.model_validate({"name": "out", "parts": list(parts)})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_each_kind_of_part_and_the_stored_form() -> None:
    made = artifact(
        {"kind": "text", "text": "notes"},
        {"kind": "data", "data": {"passed": 41, "failed": 0}},
        {"kind": "file", "name": "report.pdf", "media_type": "application/pdf", "bytes": b64(b"%PDF-1.7")},
        {"kind": "url", "url": "https://ci.example.org/builds/7/app.tar.gz", "name": "app.tar.gz"},
    )
    file = made.parts[2]
    assert isinstance(file, FilePart) and file.bytes == b"%PDF-1.7"
    again = WorkArtifact.model_validate_json(made.model_dump_json())
    assert again == made  # bytes round-trip through their base64 form


@pytest.mark.parametrize(
    ("part", "field", "rule"),
    [
        ({"kind": "file", "name": "a.bin", "bytes": b64(b"x" * (MAX_FILE_BYTES + 1))}, "bytes", "at most"),
        ({"kind": "file", "name": "../s3cr3t", "bytes": b64(b"x")}, "name", "no '/'"),
        (
            {"kind": "file", "name": "a", "media_type": "S3CR3T", "bytes": b64(b"x")},
            "media_type",
            "type/subtype",
        ),
        ({"kind": "url", "url": "javascript:alert('s3cr3t')"}, "url", "http or https"),
        ({"kind": "url", "url": "ftp://s3cr3t.example.org/x"}, "url", "http or https"),
        ({"kind": "text", "text": ""}, "text", "at least 1"),
        ({"kind": "s3cr3t"}, "parts", "'kind' must be one of 'text', 'data', 'file', 'url'"),
    ],
)
def test_a_bad_part_is_refused_by_its_field_without_the_value(
    part: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        artifact(part)
    (problem,) = validation_problems(refused.value.errors())  # as every part reports it
    assert problem.field.split(".")[0] == "parts" and (field == "parts" or problem.field.endswith(field))
    assert rule in problem.message and "s3cr3t" not in problem.message


def test_the_record_s_share_is_bounded() -> None:
    big = b64(b"x" * MAX_FILE_BYTES)
    five = [artifact({"kind": "file", "name": f"f{n}", "bytes": big}) for n in range(5)]
    assert check_size(five[:2]) == five[:2]
    with pytest.raises(Invalid) as refused:
        check_size(five)
    assert refused.value.field == "artifacts" and str(MAX_ARTIFACTS_BYTES) in refused.value.message
