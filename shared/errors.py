"""One base for every error Loom anticipates: :class:`LoomError`.

A ``LoomError`` is a refusal the caller can act on; anything else that escapes
a REST route, an MCP tool or a CLI command is a bug, or a NATS failure, which
:mod:`shared.nats.failures` turns into one for every part (kept out of this
module: Shuttle imports it and never NATS). Each part renders it one way only:

* Weft: the HTTP envelope ``{"error": code, "message": ..., "details": {"field": ...}}``
  with the status taken from ``code``;
* Warp and Pattern: an MCP tool error whose text is ``message``, with the same
  envelope (:func:`error_document`) in its ``_meta`` (``shared.mcp.toolerrors``);
* Shuttle: one ``shuttle: error: <message>`` line and an exit code.

``message`` names the field and the rule and never contains the rejected
value: people paste the wrong thing into the wrong field, and a token pasted
as a capability must not come back in a response, a log line or a CLI error.
:func:`validation_problems` applies the same rule to pydantic's errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

INVALID: Final = "invalid"
NOT_FOUND: Final = "not_found"
CONFLICT: Final = "conflict"
FORBIDDEN: Final = "forbidden"
UNAVAILABLE: Final = "unavailable"
TOO_MANY: Final = "too_many_requests"


class LoomError(Exception):
    """An anticipated failure: ``code`` says what kind, ``message`` is safe to show.

    ``field`` is the input at fault (the message then starts with ``"<field>: "``)
    and ``rule`` the rule it broke, when there is one to state.
    """

    code: str = INVALID

    def __init__(
        self, message: str, *, field: str | None = None, rule: str | None = None, code: str | None = None
    ) -> None:
        if field and not message.startswith(f"{field}:"):
            message = f"{field}: {message}"
        super().__init__(message)
        self.message = message
        self.field = field
        self.rule = rule
        if code is not None:
            self.code = code


class Invalid(LoomError):
    """The caller's input breaks a rule."""

    code = INVALID


class NotFound(LoomError):
    code = NOT_FOUND


class Conflict(LoomError):
    """The current state does not allow the operation (it may later)."""

    code = CONFLICT


class Forbidden(LoomError):
    """The caller may not do this (not the claimant, not the owner)."""

    code = FORBIDDEN


class TooMany(LoomError):
    """The caller went past a rate it may use; waiting helps (the message says how long)."""

    code = TOO_MANY


class Unavailable(LoomError):
    """A dependency (NATS, a service still starting) is not there; retrying may help."""

    code = UNAVAILABLE


def error_details(exc: LoomError) -> dict[str, str] | None:
    """``{"field", "rule"}`` of ``exc`` (only what it has), or None (a rate, for one, is a
    rule without a field)."""
    found = {"field": exc.field, "rule": exc.rule}
    return {key: value for key, value in found.items() if value} or None


def error_document(exc: LoomError) -> dict[str, Any]:
    """The machine-readable form of ``exc``, the same in every part: Weft's error body
    and the ``_meta["loom/error"]`` of Warp's and Pattern's tool errors
    (``{"error": code, "message": ..., "details": {"field", "rule"} | null}``).
    The codes are listed in docs/architecture.md, Errors."""
    return {"error": exc.code, "message": exc.message, "details": error_details(exc)}


# -- never echo the rejected value ---------------------------------------------------

_NAME = re.compile(r"[a-z][a-z_-]{0,39}|[A-Z][A-Z_]{0,39}")
"""What an input name looks like: lowercase letters, '_' and '-' (or an environment
variable's upper-case letters and '_'), up to 40 characters.

Names of fields, options and dictionary keys that fit are shown in errors;
anything else (digits, mixed case, symbols, length) is shown as ``*``: random
credentials practically always have digits or mixed case, so a token pasted
where a name belongs is never repeated back."""

HIDDEN: Final = "*"


def shown_name(name: object) -> str:
    """``name`` if it looks like an input name (safe to show), else ``*``."""
    return name if isinstance(name, str) and _NAME.fullmatch(name) else HIDDEN


def safe_loc(loc: Iterable[object]) -> tuple[str | int, ...]:
    """A pydantic ``loc`` fit to show: list indices and name-shaped parts stay,
    anything else (a dictionary key or an unknown field a caller chose) is ``*``."""
    return tuple(part if isinstance(part, int) or part == "[key]" else shown_name(part) for part in loc)


def field_path(loc: Iterable[object]) -> str:
    """A pydantic ``loc`` as ``a.b.0.c`` (see :func:`safe_loc`)."""
    return ".".join(str(part) for part in safe_loc(loc))


def without_value(message: str, value: object) -> str:
    """``message`` with any copy of the rejected ``value`` cut out (a safety net for
    library messages that quote their input, such as an unknown union tag)."""
    if isinstance(value, str) and len(value) >= 4:
        for form in (repr(value), value):
            if form in message:
                message = message.replace(form, "the given value")
    return message


def _strings(given: object) -> Iterator[str]:
    if isinstance(given, str):
        yield given
    elif isinstance(given, Mapping):
        for key, value in given.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(given, list | tuple):
        for item in given:
            yield from _strings(item)


def without_given(exc: LoomError, given: object) -> LoomError:
    """``exc`` with every string of the caller's input ``given`` (a JSON document: keys
    and values at any depth) cut out of its message and field, except name-shaped
    ones (:func:`shown_name`), which a message may rightly name. For refusals built
    by code that does not follow the rule itself (a safety net at the boundary)."""
    found = sorted({s for s in _strings(given) if len(s) >= 4 and shown_name(s) != s}, key=len, reverse=True)
    message, field = exc.message, exc.field
    for value in found:
        if field and value in field:
            shown = field.replace(value, HIDDEN)
            message, field = message.replace(field, shown), shown
        message = without_value(message, value)
    exc.message, exc.field, exc.args = message, field, (message,)
    return exc


@dataclass(frozen=True)
class Problem:
    """One field's problem from a pydantic validation error."""

    field: str
    message: str
    type: str


def validation_problems(
    errors: Sequence[Mapping[str, Any]], *, prefix: Sequence[object] = ()
) -> list[Problem]:
    """Field problems from ``ValidationError.errors()``, without the rejected input.

    The message is pydantic's own (or our validator's, minus pydantic's "Value
    error, " prefix); neither names the input, and :func:`without_value` makes sure.
    An unknown field is named only when it looks like a name (:func:`shown_name`).
    """
    problems: list[Problem] = []
    for err in errors:
        loc = (*prefix, *(err.get("loc") or ()))
        kind = str(err.get("type", ""))
        message = str(err.get("msg", "invalid"))
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if kind == "extra_forbidden":
            message = "unknown field"
        elif kind == "union_tag_invalid":  # pydantic's message quotes the tag given
            ctx = err.get("ctx") or {}
            message = f"{ctx.get('discriminator', 'its tag')} must be one of {ctx.get('expected_tags', '')}"
        message = without_value(message, err.get("input"))
        field = field_path(loc)
        if field and message.startswith(f"{field}:"):
            message = message[len(field) + 1 :].lstrip()
        problems.append(Problem(field=field or "input", message=message, type=kind))
    return problems


def describe_problems(problems: Sequence[Problem], *, limit: int = 5) -> str:
    """One line: ``field: rule; field: rule; and 2 more``."""
    text = "; ".join(f"{p.field}: {p.message}" for p in problems[:limit])
    if len(problems) > limit:
        text += f"; and {len(problems) - limit} more"
    return text or "invalid input"


def describe_validation(errors: Sequence[Mapping[str, Any]], *, limit: int = 10) -> str:
    """A pydantic ``ValidationError.errors()`` as one line of field problems (settings read
    at start-up: each process's one clear line)."""
    return describe_problems(validation_problems(errors), limit=limit)


def parse_problem(exc: BaseException) -> str:
    """Where and why a JSON, YAML or TOML document did not parse, without quoting it.

    YAML's own message reprints the offending line (which may hold a secret);
    its ``problem`` and ``problem_mark`` say the same without it. JSON's and
    TOML's messages carry only the position."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        problem = getattr(exc, "problem", None) or "invalid syntax"
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    if type(exc).__module__.startswith("yaml"):
        return "invalid syntax"
    return " ".join(str(exc).split())
