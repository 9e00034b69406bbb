"""What an agent hands back besides its result: named artifacts of text, JSON data, small
files (bytes with a name and a media type) and file URLs (docs/warp.md, Artifacts).

They are kept on the work record, which every Weft replica and Warp copies, so they are
bounded: a file's bytes up to :data:`MAX_FILE_BYTES`, all of an item's artifacts up to
:data:`MAX_ARTIFACTS_BYTES` as JSON. Anything larger is handed over as a URL (a pushed
branch, a release asset, a bucket object) instead. A2A clients receive each artifact as
one of the task's artifacts (``weft/a2a/mapping.py``).
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Base64Bytes, Field, TypeAdapter

from shared.base import AnyJson, LoomModel
from shared.errors import Invalid
from shared.names import validate_media_type

MAX_ARTIFACTS: Final = 16
MAX_PARTS: Final = 16
MAX_FILE_BYTES: Final = 64 * 1024
MAX_ARTIFACTS_BYTES: Final = 256 * 1024
"""All of one item's artifacts, as the JSON stored on its record (file bytes in base64)."""
MAX_TEXT: Final = 100_000
MAX_URL: Final = 2048

FILE_NAME_RULE: Final = "1-255 characters, no '/', '\\\\' or control characters"
URL_RULE: Final = f"an http or https URL of at most {MAX_URL} characters"


def _file_name(value: str) -> str:
    if not 0 < len(value) <= 255 or any(c in value for c in "/\\") or any(ord(c) < 32 for c in value):
        raise ValueError(f"must be {FILE_NAME_RULE}")
    return value


def _url(value: str) -> str:
    if len(value) > MAX_URL or not re.match(r"^https?://[^\s/]+", value) or any(c.isspace() for c in value):
        raise ValueError(f"must be {URL_RULE}")
    return value


def _file_bytes(value: bytes) -> bytes:
    if len(value) > MAX_FILE_BYTES:
        raise ValueError(f"must be at most {MAX_FILE_BYTES} bytes (hand a larger file over as a url part)")
    return value


MediaType = Annotated[str, AfterValidator(validate_media_type)]
FileName = Annotated[str, AfterValidator(_file_name)]


class TextPart(LoomModel):
    kind: Literal["text"] = "text"
    text: str = Field(min_length=1, max_length=MAX_TEXT)


class DataPart(LoomModel):
    kind: Literal["data"] = "data"
    data: AnyJson


class FilePart(LoomModel):
    """A small file, its bytes base64-encoded in JSON."""

    kind: Literal["file"] = "file"
    name: FileName
    media_type: MediaType = "application/octet-stream"
    bytes: Annotated[Base64Bytes, AfterValidator(_file_bytes)] = Field(
        description=f"The file's content, base64 (at most {MAX_FILE_BYTES} bytes decoded)"
    )


class UrlPart(LoomModel):
    """A file (or anything) where the client can fetch it."""

    kind: Literal["url"] = "url"
    url: Annotated[str, AfterValidator(_url)]
    name: FileName | None = None
    media_type: MediaType | None = None


ArtifactPart = Annotated[TextPart | DataPart | FilePart | UrlPart, Field(discriminator="kind")]


class WorkArtifact(LoomModel):
    """One named output of the work (a patch, a report, a built file)."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=1000)
    parts: list[ArtifactPart] = Field(min_length=1, max_length=MAX_PARTS)


Artifacts = Annotated[list[WorkArtifact], Field(max_length=MAX_ARTIFACTS)]
_ADAPTER: Final = TypeAdapter(list[WorkArtifact])


def check_size(artifacts: list[WorkArtifact]) -> list[WorkArtifact]:
    """``artifacts`` if their stored form fits the record's share; otherwise refused by name."""
    size = len(_ADAPTER.dump_json(artifacts))
    if size > MAX_ARTIFACTS_BYTES:
        raise Invalid(
            f"artifacts: must be at most {MAX_ARTIFACTS_BYTES} bytes as stored (file bytes in base64); "
            "hand larger files over as url parts",
            field="artifacts",
            rule=f"at most {MAX_ARTIFACTS_BYTES} bytes",
        )
    return artifacts
