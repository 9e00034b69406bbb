"""A small secret scanner for text Loom keeps and moves: memories (Pattern) and
context trees carried between projects (export and import).

Memories and trees are shared, exported and replayed into prompts, so a
credential pasted into one travels far. The scanner reports the kind and
position, never the matched text; callers decide whether to warn or refuse
(Pattern: ``PATTERN_SECRET_SCAN``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("API key (sk-…)", re.compile(r"\bsk-(?:ant-|proj-|live-)?[A-Za-z0-9_-]{20,}")),
    ("Stripe key", re.compile(r"\b(?:sk|rk|pk)_live_[A-Za-z0-9]{16,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("NATS nkey seed", re.compile(r"\bS[UACONP][A-Z2-7]{56}\b")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        "connection string with credentials",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]+:[^\s@/]{3,}@[^\s/]+"),
    ),
    ("bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    (
        "password or token assignment",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key"
            r"|access[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key|token)(?![a-z0-9])"
            r"[\"']?\s*[:=]\s*[\"']?(?![<$*{\[])[^\s\"',;]{6,}"
        ),
    ),
)


@dataclass(frozen=True)
class SecretFinding:
    kind: str
    offset: int
    """Character offset of the first match (the matched text is never reported)."""
    count: int = 1

    def found(self, field: str) -> str:
        """Where and what, never the text: ``<field>: possible <kind> at character <n>``."""
        times = f" ({self.count} matches)" if self.count > 1 else ""
        return f"{field}: possible {self.kind} at character {self.offset}{times}"

    def warning(self, field: str = "content") -> str:
        return (
            f"{self.found(field)}; the memory was stored anyway "
            "— forget it if that was a mistake (PATTERN_SECRET_SCAN=off silences this, =block refuses)"
        )


def scan(text: str) -> list[SecretFinding]:
    """Every kind of secret that appears in ``text``, first position and count."""
    findings: list[SecretFinding] = []
    for kind, pattern in _RULES:
        matches = list(pattern.finditer(text))
        if matches:
            findings.append(SecretFinding(kind=kind, offset=matches[0].start(), count=len(matches)))
    return findings
