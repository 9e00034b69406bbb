"""The table of error codes in docs/architecture.md is the codes the parts answer with.

Codes are gathered from the code itself: the ``code`` of every ``LoomError``
class in Weft, Warp, Pattern and shared, Weft's status table, and every code
written out where an error is raised (``code="..."``, ``ApiError("...")``,
``envelope(503, "...")``). Each must be a row, and each row must be one of them.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

from shared.errors import LoomError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "warp", "weft", "pattern")
WRITTEN = (
    re.compile(r"""\bcode=["']([A-Za-z_]+)["']"""),
    re.compile(r"""\bApiError\(\s*["']([a-z_]+)["']"""),
    re.compile(r"""\benvelope\(\s*\d+,\s*["']([a-z_]+)["']"""),
    re.compile(r"""^[A-Z_]+\s*(?::\s*Final)?\s*=\s*["']([a-z_]+)["']\s*$""", re.MULTILINE),
)
"""Where a code is spelled out: a keyword, Weft's two helpers, and module constants
(``VALIDATION_ERROR = "validation_error"``, ``NOT_FOUND: Final = "not_found"``) in the
modules that define codes."""
CONSTANT_MODULES = ("shared/errors.py", "shared/mcp/toolerrors.py", "shared/nats/failures.py")


def documented() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### Error codes", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Za-z_]+)` \|", section, re.MULTILINE))


def _subclasses(cls: type[LoomError]) -> Iterator[type[LoomError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def used() -> set[str]:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if not info.name.endswith(".__main__"):  # runs the command line when imported
                importlib.import_module(info.name)
    codes = {LoomError.code}
    codes |= {cls.code for cls in _subclasses(LoomError) if cls.__module__.split(".")[0] in PACKAGES}
    from weft import errors as weft_errors

    codes |= set(weft_errors.STATUS_FOR_CODE) | set(weft_errors._CODE_FOR_STATUS.values()) | {"error"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            relative = str(path.relative_to(ROOT))
            for pattern in WRITTEN[:3]:
                codes |= set(pattern.findall(source))
            if relative in CONSTANT_MODULES:
                codes |= set(WRITTEN[3].findall(source))
    return codes


def test_every_code_is_documented_and_every_row_is_used() -> None:
    table, found = documented(), used()
    assert sorted(found - table) == [], "codes missing from docs/architecture.md, Error codes"
    assert sorted(table - found) == [], "rows of docs/architecture.md, Error codes, that no part uses"
