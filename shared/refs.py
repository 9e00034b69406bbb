"""What a person types for a record they saw on a screen: its full id, the start of it, or
a name it carries (a work item's task id, an agent's handle). One rule resolves all of
them, for every part (Weft's ``/resolve`` routes; Shuttle through them).

The order is fixed so that a reference means one thing: a full id, then a name, then an
id prefix of at least :data:`MIN_PREFIX` characters. More than one match is refused with
the ids that matched (never the reference itself, which may be anything pasted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from shared.errors import Invalid, NotFound

MIN_PREFIX = 4
"""The shortest id prefix accepted: shorter ones match too much to be meant."""
MAX_REF_LENGTH = 256
SHOWN_MATCHES = 5
"""How many of the matching ids an ambiguity names."""
_HEX = re.compile(r"[0-9a-f]+")

Matched = Literal["id", "name", "prefix"]


@dataclass(frozen=True)
class Candidate:
    """One record a reference may name: its id and the names it is also known by."""

    id: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resolved:
    id: str
    matched: Matched


class Ambiguous(Invalid):
    """The reference names several records; ``ids`` are theirs (the first few)."""

    def __init__(self, field: str, what: str, ids: list[str], total: int) -> None:
        shown = ", ".join(ids[:SHOWN_MATCHES]) + (", ..." if total > SHOWN_MATCHES else "")
        super().__init__(
            f"names {total} {what}s ({shown}); give more of the id, or the full id",
            field=field,
            rule="one match",
        )
        self.ids = ids[:SHOWN_MATCHES]


def check_ref(ref: object, field: str) -> str:
    if not isinstance(ref, str) or not 1 <= len(ref) <= MAX_REF_LENGTH or ref != ref.strip():
        raise Invalid(
            f"must be an id, a unique id prefix or a name, of 1-{MAX_REF_LENGTH} characters",
            field=field,
            rule="reference",
        )
    return ref


def resolve(ref: object, candidates: Iterable[Candidate], *, field: str, what: str) -> Resolved:
    """The one record ``ref`` names among ``candidates``: by full id, else by a name,
    else by an id prefix (:data:`MIN_PREFIX` or more hex characters)."""
    text = check_ref(ref, field)
    by_name: list[str] = []
    by_prefix: list[str] = []
    prefix_ok = len(text) >= MIN_PREFIX and _HEX.fullmatch(text) is not None
    for candidate in candidates:
        if candidate.id == text:
            return Resolved(candidate.id, "id")
        if text in candidate.names:
            by_name.append(candidate.id)
        elif prefix_ok and candidate.id.startswith(text):
            by_prefix.append(candidate.id)
    steps: tuple[tuple[list[str], Matched], ...] = ((by_name, "name"), (by_prefix, "prefix"))
    for found, matched in steps:
        unique = sorted(set(found))
        if len(unique) == 1:
            return Resolved(unique[0], matched)
        if unique:
            raise Ambiguous(field, what, unique, len(unique))
    rule = f"a full id, a name or at least {MIN_PREFIX} leading characters of an id"
    raise NotFound(f"no {what} matches (give {rule})", field=field, rule="reference")
