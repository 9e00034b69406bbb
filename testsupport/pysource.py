"""Reading the project's own Python source in tests (layering, settings and import rules)."""

from __future__ import annotations

import ast

TRIES = 5


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """:func:`ast.parse`, tried again when CPython 3.11 reports "AST constructor recursion
    depth mismatch". Its AST converter keeps its depth in state that the interpreter's
    threads share (CPython gh-106905), and 3.11's traceback module parses source lines to
    place its carets: a traceback formatted by another thread of the test process at that
    moment (an in-process Weft logging a warning) trips the check, though both parses were
    fine. Seen in a fresh-clone run; the retry is of the same, pure, call."""
    for attempt in range(TRIES):
        try:
            return ast.parse(source, filename)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == TRIES - 1:
                raise
    raise AssertionError("unreachable")  # the loop returns or raises
