"""Writing TOML (the standard library only reads it).

Shuttle's settings are a few top-level strings and numbers, but the user file
``~/.loom/config.toml`` is shared with Warp (its ``[channels.*]`` tables), so
whatever else the file holds must survive ``shuttle config set``: tables,
arrays of tables, arrays, inline tables, dates. Comments do not survive (the
file is re-read with :mod:`tomllib` and written again).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(value: str) -> str:
    # JSON's escapes are valid TOML basic-string escapes; TOML also wants DEL escaped.
    return '"' + json.dumps(value, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f") + '"'


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def value(item: Any) -> str:
    """One TOML value (inline form)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        if math.isnan(item):
            return "nan"
        if math.isinf(item):
            return "inf" if item > 0 else "-inf"
        return repr(item)
    if isinstance(item, str):
        return _string(item)
    if isinstance(item, datetime | date | time):
        return item.isoformat()
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, Mapping):
        return "{" + ", ".join(f"{_key(str(k))} = {value(v)}" for k, v in item.items()) + "}"
    raise TypeError(f"cannot write a {type(item).__name__} as TOML")


def dumps(data: Mapping[str, Any], header: str = "") -> str:
    lines = [f"# {header}"] if header else []
    _table(lines, [], data)
    return "\n".join(lines).strip("\n") + "\n"


def _table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    nested = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    arrays = {k: v for k, v in table.items() if _is_table_array(v)}
    for key, item in table.items():
        if key not in nested and key not in arrays:
            lines.append(f"{_key(str(key))} = {value(item)}")
    for key, item in nested.items():
        full = [*path, _key(str(key))]
        lines.extend(["", f"[{'.'.join(full)}]"])
        _table(lines, full, item)
    for key, items in arrays.items():
        full = [*path, _key(str(key))]
        for entry in items:
            lines.extend(["", f"[[{'.'.join(full)}]]"])
            _table(lines, full, entry)
