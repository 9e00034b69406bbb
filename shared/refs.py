"""What a person types for a record they saw on a screen: its full id, the start of it, or
a name it carries (a work item's task id, an agent's handle). One rule resolves all of
them, for every part (Weft's ``/resolve`` routes; Shuttle through them).

The order is fixed so that a reference means one thing: a full id, then a name, then an
id prefix of at least :data:`MIN_PREFIX` characters. More than one match is refused with
the ids that matched (never the reference itself, which may be anything pasted).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from shared.errors import Invalid, NotFound

MIN_PREFIX = 4
"""The shortest id prefix accepted: shorter ones match too much to be meant."""
MAX_REF_LENGTH = 256
SHOWN_MATCHES = 5
"""How many of the matching ids an ambiguity names."""
_HEX = re.compile(r"[0-9a-f]+")

Matched = Literal["id", "name", "prefix"]


class Candidate(NamedTuple):
    """One record a reference may name: its id and the names it is also known by (a tuple:
    an index is built from one per record, 10,000 of them for a large project)."""

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


class RefIndex:
    """The records a reference may name, arranged for the rule: ids sorted (a prefix is a range)
    and each name's ids. Built once per state of a copy (Weft keeps one per revision of its
    work copy), it answers in O(log n) instead of a pass over every record."""

    def __init__(self, candidates: Iterable[Candidate]) -> None:
        self.ids: list[str] = []
        self.by_name: dict[str, list[str]] = {}
        for candidate in candidates:
            self.ids.append(candidate.id)
            for name in candidate.names:
                if name:
                    self.by_name.setdefault(name, []).append(candidate.id)
        self.ids.sort()

    def _is_id(self, text: str) -> bool:
        at = bisect_left(self.ids, text)
        return at < len(self.ids) and self.ids[at] == text

    def _with_prefix(self, text: str) -> list[str]:
        found = []
        for at in range(bisect_left(self.ids, text), len(self.ids)):
            if not self.ids[at].startswith(text):
                break
            found.append(self.ids[at])
        return found

    def resolve(self, ref: object, *, field: str, what: str) -> Resolved:
        """The one record ``ref`` names: by full id, else by a name, else by an id prefix
        (:data:`MIN_PREFIX` or more hex characters)."""
        text = check_ref(ref, field)
        if self._is_id(text):
            return Resolved(text, "id")
        by_name = sorted(set(self.by_name.get(text, ())))
        prefix_ok = len(text) >= MIN_PREFIX and _HEX.fullmatch(text) is not None
        steps: tuple[tuple[list[str], Matched], ...] = (
            (by_name, "name"),
            (self._with_prefix(text) if prefix_ok and not by_name else [], "prefix"),
        )
        for found, matched in steps:
            if len(found) == 1:
                return Resolved(found[0], matched)
            if found:
                raise Ambiguous(field, what, found, len(found))
        rule = f"a full id, a name or at least {MIN_PREFIX} leading characters of an id"
        raise NotFound(f"no {what} matches (give {rule})", field=field, rule="reference")


def resolve(ref: object, candidates: Iterable[Candidate], *, field: str, what: str) -> Resolved:
    """The one record ``ref`` names among ``candidates`` (:meth:`RefIndex.resolve`)."""
    return RefIndex(candidates).resolve(ref, field=field, what=what)
