"""Client-side checks of a work submission, so that a batch file with one bad
entry is refused before anything is sent (Weft validates again).

The rules are the fabric's own: names and tokens from ``shared.names``, the limits
from ``shared.limits`` (``tests/shared/work/test_submission_parity.py`` holds these
checks to ``WorkSubmission``). They stay free of pydantic so that ``shuttle submit``
starts fast.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.errors import Invalid as LoomInvalid
from shared.errors import parse_problem, shown_name
from shared.limits import (
    DESCRIPTION_MAX_LENGTH,
    MAX_ATTEMPTS_LIMIT,
    MAX_DEPENDENCIES,
    MAX_REVIEW_ROUNDS,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TASK_ID_MAX_LENGTH,
)
from shuttle.errors import UsageError

SCOPES = ("private", "personal", "team", "public")
SUBMISSION_FIELDS = (
    "task_id",
    "description",
    "capability",
    "boundary",
    "priority",
    "required_agent_type",
    "preferred_agent_type",
    "deadline",
    "context",
    "scope",
    "max_attempts",
    "depends_on",
    "review",
    "budget",
    "isolated",
    "veto",
)
BUDGET_FIELDS = ("cost", "tokens")
REVIEW_FIELDS = ("capability", "rounds")
PLAN_FIELDS = ("name", "after")
"""What a plan entry adds to a submission: a local name, and the names it comes after."""
_RELATIVE = re.compile(r"\+?(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


class Invalid(LoomInvalid, ValueError):
    """One field's problem; the message names the field and the rule, never the value."""


def new_task_id() -> str:
    return f"shuttle-{uuid.uuid4().hex[:12]}"


def token(value: Any, field: str) -> str:
    from shared.names import InvalidNameError, validate_token

    try:
        return validate_token(value, field)
    except InvalidNameError as exc:
        raise Invalid(str(exc)) from None


def task_id(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= TASK_ID_MAX_LENGTH:
        raise Invalid(f"task_id: must be a string of 1-{TASK_ID_MAX_LENGTH} characters")
    return value


def description(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > DESCRIPTION_MAX_LENGTH:
        raise Invalid(f"description: must be non-empty text of at most {DESCRIPTION_MAX_LENGTH} characters")
    return value


def priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise Invalid(f"priority: must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")
    return int(value)


def max_attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise Invalid(f"max_attempts: must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}")
    return int(value)


def scope(value: Any) -> str:
    if value not in SCOPES:
        raise Invalid(f"scope: must be one of {', '.join(SCOPES)}")
    return str(value)


def deadline(value: Any, now: datetime | None = None, *, field: str = "deadline") -> str:
    """An ISO 8601 time with a timezone, or a duration from now: ``30m``, ``+2h``, ``1d``."""
    if isinstance(value, datetime):  # YAML turns unquoted timestamps into datetimes
        if value.tzinfo is None:
            raise Invalid(f"{field}: must include a timezone (e.g. 2026-01-01T12:00:00Z)")
        return value.isoformat()
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"{field}: must be an ISO time with timezone or a duration like 30m, 2h, 1d")
    text = value.strip()
    relative = _RELATIVE.fullmatch(text)
    if relative:
        seconds = float(relative.group(1)) * _UNITS[relative.group(2)]
        if seconds <= 0:
            raise Invalid(f"{field}: a duration must be more than zero")
        return ((now or datetime.now(UTC)) + timedelta(seconds=seconds)).isoformat()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Invalid(
            f"{field}: must be an ISO time with timezone (2026-01-01T12:00:00Z) "
            "or a duration like 30m, 2h, 1d"
        ) from None
    if moment.tzinfo is None:
        raise Invalid(f"{field}: must include a timezone (e.g. 2026-01-01T12:00:00Z)")
    return moment.isoformat()


def work_ids(value: Any, field: str) -> list[str]:
    """A list of work ids (32 lowercase hex), each once."""
    from shared.names import WORK_ID_RULE, is_work_id

    if not isinstance(value, list):
        raise Invalid(f"{field}: must be a list of work ids")
    if len(value) > MAX_DEPENDENCIES:
        raise Invalid(f"{field}: at most {MAX_DEPENDENCIES} ids")
    for n, entry in enumerate(value):
        if not is_work_id(entry):
            raise Invalid(f"{field}.{n}: must be {WORK_ID_RULE}")
    if len(set(value)) != len(value):
        raise Invalid(f"{field}: must not name the same item twice")
    return list(value)


def review(value: Any) -> dict[str, Any]:
    """``{capability, rounds}``: who reviews each result, and after how many rejections it fails."""
    if not isinstance(value, dict):
        raise Invalid("review: must be an object with capability and optionally rounds")
    unknown = sorted(set(value) - set(REVIEW_FIELDS))
    if unknown:
        raise Invalid(f"review.{shown_name(unknown[0])}: unknown field (known: {', '.join(REVIEW_FIELDS)})")
    if value.get("capability") in (None, ""):
        raise Invalid("review.capability: is required")
    clean: dict[str, Any] = {"capability": token(value["capability"], "review.capability")}
    if value.get("rounds") is not None:
        rounds = value["rounds"]
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_REVIEW_ROUNDS:
            raise Invalid(f"review.rounds: must be an integer from 1 to {MAX_REVIEW_ROUNDS}")
        clean["rounds"] = rounds
    return clean


def budget(value: Any) -> dict[str, Any]:
    """``{cost, tokens}``: the item's limit (Weft checks the ranges, docs/operations.md)."""
    if not isinstance(value, dict):
        raise Invalid("budget: must be an object with cost and/or tokens")
    unknown = sorted(set(value) - set(BUDGET_FIELDS))
    if unknown:
        raise Invalid(f"budget.{shown_name(unknown[0])}: unknown field (known: {', '.join(BUDGET_FIELDS)})")
    cost, tokens = value.get("cost"), value.get("tokens")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float) or cost <= 0):
        raise Invalid("budget.cost: must be a number above 0")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
        raise Invalid("budget.tokens: must be a whole number from 1")
    return {k: v for k, v in (("cost", cost), ("tokens", tokens)) if v is not None}


def names(value: Any, field: str) -> list[str]:
    """Local names of a plan's items (``after``)."""
    if not isinstance(value, list):
        raise Invalid(f"{field}: must be a list of names of this plan's items")
    return [token(v, f"{field}.{n}") for n, v in enumerate(value)]


def context(value: Any) -> dict[str, Any]:
    """A JSON object, given as a dict, as JSON text, or as ``@path`` to a JSON file."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise Invalid("context: must be a JSON object")
    text = value
    if text.startswith("@"):
        try:
            text = Path(text[1:]).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise Invalid(f"context: cannot read the @file ({exc.strerror or type(exc).__name__})") from None
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise Invalid(f"context: not valid JSON ({parse_problem(exc)})") from None
    if not isinstance(parsed, dict):
        raise Invalid('context: must be a JSON object, e.g. \'{"repo": "acme/app"}\'')
    return parsed


def flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{field}: must be true or false")
    return value


def submission(raw: Any, where: str = "", *, plan: bool = False) -> dict[str, Any]:
    """Check one submission dict (with ``plan``: a plan entry, which may also carry ``name``
    and ``after``); fills ``task_id`` when absent. Raises :class:`UsageError`."""
    prefix = f"{where}: " if where else ""
    if not isinstance(raw, dict):
        raise UsageError(f"{prefix}must be an object with at least description and capability")
    known = SUBMISSION_FIELDS + (PLAN_FIELDS if plan else ())
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise UsageError(f"{prefix}unknown field {shown_name(unknown[0])!r} (known: {', '.join(known)})")
    for required in ("description", "capability"):
        if raw.get(required) in (None, ""):
            raise UsageError(f"{prefix}{required}: is required")
    checks: dict[str, Callable[[Any], Any]] = {
        "task_id": task_id,
        "description": description,
        "capability": lambda v: token(v, "capability"),
        "boundary": lambda v: token(v, "boundary"),
        "priority": priority,
        "required_agent_type": lambda v: token(v, "required_agent_type"),
        "preferred_agent_type": lambda v: token(v, "preferred_agent_type"),
        "deadline": deadline,
        "context": context,
        "scope": scope,
        "max_attempts": max_attempts,
        "depends_on": lambda v: work_ids(v, "depends_on"),
        "review": review,
        "budget": budget,
        "isolated": lambda v: flag(v, "isolated"),
        "veto": lambda v: flag(v, "veto"),
        "name": lambda v: token(v, "name"),
        "after": lambda v: names(v, "after"),
    }
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        try:
            clean[key] = checks[key](value)
        except Invalid as exc:
            raise UsageError(f"{prefix}{exc}") from None
    clean.setdefault("task_id", new_task_id())
    return clean


def is_plan(entries: list[Any]) -> bool:
    """Whether a batch file is a plan: some entry has a local ``name`` or comes ``after`` one."""
    return any(isinstance(e, dict) and (e.get("name") is not None or e.get("after")) for e in entries)


def read_data(path: str, option: str = "--file") -> Any:
    """A JSON or YAML file's content (YAML by its name, or stdin, ``-``, not starting
    like JSON)."""
    import sys

    try:
        text = sys.stdin.read() if path == "-" else Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{option}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if path.endswith((".yaml", ".yml")) or (path == "-" and not text.lstrip().startswith(("{", "["))):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UsageError(f"{option} {path}: not valid YAML ({parse_problem(exc)})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{option} {path}: not valid JSON ({parse_problem(exc)})") from None


def load_batch(path: str) -> list[dict[str, Any]]:
    """A JSON or YAML file holding one submission, a list of them, or ``{"items": [...]}``;
    ``-`` reads stdin. Every entry is checked before anything is sent. A plan (some entry
    has a ``name`` or comes ``after`` one, see :func:`is_plan`) keeps those fields."""
    data = read_data(path)
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    entries = data if isinstance(data, list) else [data]
    if not entries:
        raise UsageError(f"--file {path}: holds no work items")
    if len(entries) > 1000:
        raise UsageError(f"--file {path}: at most 1000 items per batch (has {len(entries)})")
    plan = is_plan(entries)
    return [submission(entry, f"--file {path}: item {n}", plan=plan) for n, entry in enumerate(entries, 1)]
