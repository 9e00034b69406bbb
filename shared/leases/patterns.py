"""What a lease covers: gitignore-style path patterns, normalised, and when two overlap
(docs/leases.md, Patterns).

Pure functions, no I/O. A pattern means what it means in a ``.gitignore`` at the
repository root, as ``pathspec`` (the well-kept implementation of those rules) matches it:
``src/api/**`` covers every file under ``src/api``, ``*.md`` a Markdown file at any depth,
``src/api`` the file or the directory with everything in it.

Two leases conflict when some path could match both patterns. Matching one pattern
against a path is ``pathspec``'s job (:func:`matches`); deciding whether two *patterns*
share a path is not something it offers, so :func:`overlap` decides it on the patterns'
structure: a pattern is a sequence of path segments (``**`` spans any number of them),
each a sequence of characters, ``?``, ``*`` and ``[...]`` classes, and two such sequences
share a path when both can be walked in step to the end (the same walk, one level down,
for the characters of two segments). The walk yields a witness path; the tests check
with ``pathspec`` that both patterns match each witness and that no path two patterns
both match is ever missed.

:class:`PatternIndex` makes the check cheap with thousands of leases: patterns are filed
under their literal leading directories (``src/api`` for ``src/api/*.py``), and two
patterns can only overlap when one's literal directories lead to the other's, so a check
looks at the patterns on one path of the tree and below it, not at all of them.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from shared.errors import Invalid

if TYPE_CHECKING:
    import pathspec

MAX_PATTERN: Final = 512
"""Characters in one pattern."""
MAX_PATTERNS: Final = 64
"""Patterns in one lease (or one check)."""
MAX_SEGMENTS: Final = 64

PATTERN_RULE: Final = (
    "a gitignore-style path pattern relative to the repository root "
    f"(no '..', no '!' negation, at most {MAX_PATTERN} characters)"
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PatternError(Invalid):
    """A pattern that cannot be leased; ``field`` names it by position (``patterns.2``)."""


# -- normalisation --------------------------------------------------------------------------


def normalise(pattern: object, field: str = "pattern", *, root: str | None = None) -> str:
    """The canonical form of one lease pattern, or :class:`PatternError` naming ``field``.

    ``./x`` and ``/x`` anchor at the repository root (gitignore's leading ``/``). When
    the caller knows ``root`` (the repository's own directory), an absolute path inside
    it is made relative to it and one outside it is refused; so is a ``..`` that would
    step out. ``.`` segments and repeated ``/`` are dropped. The message never
    repeats the pattern."""
    if not isinstance(pattern, str):
        raise PatternError("must be a string", field=field, rule=PATTERN_RULE)
    text = pattern.strip()
    if not text:
        raise PatternError("must not be empty", field=field, rule=PATTERN_RULE)
    if len(text) > MAX_PATTERN:
        raise PatternError(f"must be at most {MAX_PATTERN} characters", field=field, rule=PATTERN_RULE)
    if _CONTROL.search(text):
        raise PatternError("must not contain control characters", field=field, rule=PATTERN_RULE)
    if text.startswith("!"):
        raise PatternError(
            "must not be a '!' negation (lease what you change)", field=field, rule=PATTERN_RULE
        )
    if text.startswith("#"):
        raise PatternError("must not start with '#' (a comment in gitignore)", field=field, rule=PATTERN_RULE)
    anchored = False
    if text.startswith("/"):
        inside = _inside(text, root)
        if inside is None:
            raise PatternError(
                "must be relative to the repository root, not an absolute path outside the project",
                field=field,
                rule=PATTERN_RULE,
            )
        text, anchored = inside, True
    elif text.startswith("./"):
        anchored = True
    dir_only = text.endswith("/")
    segments = [s for s in text.split("/") if s not in ("", ".")]
    if any(s == ".." for s in segments):
        raise PatternError(
            "must not contain '..' (stay inside the repository)", field=field, rule=PATTERN_RULE
        )
    if not segments:
        segments = ["**"]  # the whole repository: '/', './'
        dir_only = False
    if len(segments) > MAX_SEGMENTS:
        raise PatternError(f"must have at most {MAX_SEGMENTS} path segments", field=field, rule=PATTERN_RULE)
    body = "/".join(segments)
    if anchored and len(segments) == 1 and segments[0] != "**":
        body = "/" + body  # a lone name floats to any depth unless anchored
    return body + ("/" if dir_only and segments[-1] != "**" else "")


def _inside(text: str, root: str | None) -> str | None:
    """``text`` (starting with '/') made relative: an absolute path inside ``root`` loses
    the root, a gitignore anchor (``/Makefile``) stays; None for an absolute path outside
    ``root`` (one starting with the root's own first directory, ``/home/...``)."""
    if root is None:
        return text.lstrip("/")
    base = posixpath.normpath(root).rstrip("/")
    if text.rstrip("/") == base:
        return "**"
    if text.startswith(base + "/"):
        return text[len(base) + 1 :] or "**"
    top = base.split("/")[1] if base.count("/") >= 1 and base != "" else ""
    if top and (text == f"/{top}" or text.startswith(f"/{top}/")):
        return None
    return text.lstrip("/")


_SPECIAL = re.compile(r"([\\*?\[\]])")


def exact_path(path: str) -> str:
    """The pattern that covers exactly the file ``path`` (relative to the repository root):
    anchored at the root, its wildcard characters escaped."""
    return "/" + _SPECIAL.sub(r"\\\1", path.strip("/"))


def normalise_all(
    patterns: object, field: str = "patterns", *, root: str | None = None, minimum: int = 1
) -> list[str]:
    """Each pattern normalised (errors name ``patterns.N``), duplicates dropped in order."""
    if not isinstance(patterns, list | tuple):
        raise PatternError("must be a list of patterns", field=field, rule=PATTERN_RULE)
    if len(patterns) < minimum:
        raise PatternError(f"must list at least {minimum} pattern(s)", field=field, rule=PATTERN_RULE)
    if len(patterns) > MAX_PATTERNS:
        raise PatternError(f"must list at most {MAX_PATTERNS} patterns", field=field, rule=PATTERN_RULE)
    out: list[str] = []
    for position, pattern in enumerate(patterns):
        canonical = normalise(pattern, f"{field}.{position}", root=root)
        if canonical not in out:
            out.append(canonical)
    return out


# -- matching paths (pathspec) ----------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _spec(pattern: str) -> pathspec.PathSpec[Any]:
    import pathspec  # on first use: loom-guard, which only escapes paths, never pays for it

    return pathspec.PathSpec.from_lines("gitignore", [pattern])


def matches(pattern: str, path: str) -> bool:
    """Whether the (normalised) ``pattern`` covers the repository-relative ``path``."""
    return _spec(pattern).match_file(path)


# -- the structure of a pattern ------------------------------------------------------------------

_ANY: Final = "?"
_STAR: Final = "*"


@dataclass(frozen=True)
class CharClass:
    """``[...]``: ranges of characters, or every character but those (``[!...]``)."""

    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def __contains__(self, char: str) -> bool:
        inside = any(lo <= char <= hi for lo, hi in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class Literal:
    char: str


Tok = Literal | str | CharClass

GLOBSTAR: Final = "**"


@dataclass(frozen=True)
class Segment:
    tokens: tuple[Tok, ...]
    text: str
    literal: bool = False
    """Only plain characters: it matches one name, :attr:`text_name`."""
    text_name: str = ""


PathToken = Segment | str
"""A segment, or :data:`GLOBSTAR` (any number of segments, none included)."""


def _parse_class(text: str, start: int) -> tuple[CharClass, int] | None:
    """The class opening at ``text[start] == '['`` and the index after it, or None when it
    does not close (the ``[`` is then a literal, as in gitignore)."""
    i = start + 1
    negated = i < len(text) and text[i] in "!^"
    if negated:
        i += 1
    ranges: list[tuple[str, str]] = []
    first = True
    while i < len(text):
        char = text[i]
        if char == "]" and not first:
            return CharClass(tuple(ranges), negated), i + 1
        first = False
        if char == "\\" and i + 1 < len(text):
            i += 1
            char = text[i]
        if i + 2 < len(text) and text[i + 1] == "-" and text[i + 2] != "]":
            hi = text[i + 2]
            if hi == "\\" and i + 3 < len(text):
                hi = text[i + 3]
                i += 1
            if char <= hi:
                ranges.append((char, hi))
            i += 3
            continue
        ranges.append((char, char))
        i += 1
    return None


def _segment(text: str) -> Segment:
    tokens: list[Tok] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            tokens.append(Literal(text[i + 1]))
            i += 2
        elif char == "*":
            if not tokens or tokens[-1] != _STAR:
                tokens.append(_STAR)
            i += 1
        elif char == "?":
            tokens.append(_ANY)
            i += 1
        elif char == "[" and (parsed := _parse_class(text, i)) is not None:
            tokens.append(parsed[0])
            i = parsed[1]
        else:
            tokens.append(Literal(char))
            i += 1
    literal = all(isinstance(t, Literal) for t in tokens)
    name = "".join(t.char for t in tokens if isinstance(t, Literal)) if literal else ""
    return Segment(tuple(tokens), text, literal, name)


@functools.lru_cache(maxsize=65536)
def structure(pattern: str) -> tuple[PathToken, ...]:
    """The segments a normalised pattern matches, descendants included: a file path
    matches the pattern exactly when its segments can be matched to these."""
    dir_only = pattern.endswith("/")
    body = pattern.rstrip("/")
    anchored = body.startswith("/") or "/" in body
    parts = [p for p in body.split("/") if p]
    tokens: list[PathToken] = [] if anchored else [GLOBSTAR]
    for part in parts:
        if part == GLOBSTAR:
            if not tokens or tokens[-1] != GLOBSTAR:
                tokens.append(GLOBSTAR)
        else:
            tokens.append(_segment(part))
    if tokens and tokens[-1] == GLOBSTAR and parts and parts[-1] == GLOBSTAR and anchored:
        tokens[-1:] = [_segment("*"), GLOBSTAR]  # 'a/**': something inside a, not a itself
    elif dir_only:
        tokens += [_segment("*"), GLOBSTAR]  # 'a/': what is inside the directory a
    elif parts and parts[-1] == "*":
        pass  # 'a/*': pathspec matches what is directly in a, not deeper
    elif not tokens or tokens[-1] != GLOBSTAR:
        tokens.append(GLOBSTAR)  # 'a' covers a file a and everything under a directory a
    return tuple(tokens)


def literal_prefix(pattern: str) -> tuple[str, ...]:
    """The pattern's leading segments that are plain names (where it sits in the tree)."""
    out: list[str] = []
    for token in structure(pattern):
        if isinstance(token, str) or not token.literal:
            break
        out.append(token.text_name)
    return tuple(out)


# -- overlap ----------------------------------------------------------------------------------------

_CANDIDATES: Final = tuple("xa0_-.") + tuple(chr(c) for c in range(0x21, 0x7F))


def _char_both(a: Tok, b: Tok) -> str | None:
    """A character both tokens accept (never '/'), or None."""
    if isinstance(a, Literal) and isinstance(b, Literal):
        return a.char if a.char == b.char else None
    for lit, other in ((a, b), (b, a)):
        if isinstance(lit, Literal):
            return lit.char if _accepts(other, lit.char) else None
    candidates: list[str] = list(_CANDIDATES)
    for token in (a, b):
        if isinstance(token, CharClass):
            for lo, hi in token.ranges:
                candidates += [lo, hi, chr(ord(lo) + 1), chr(max(ord(hi) - 1, 0))]
    for char in candidates:
        if char != "/" and _accepts(a, char) and _accepts(b, char):
            return char
    return None


def _accepts(token: Tok, char: str) -> bool:
    if char == "/":
        return False
    if isinstance(token, Literal):
        return token.char == char
    if isinstance(token, CharClass):
        return char in token
    return True  # '?', '*'


@functools.lru_cache(maxsize=65536)
def _segment_regex(segment: Segment) -> re.Pattern[str]:
    """The names ``segment`` matches, as a regular expression (for the literal fast path)."""
    parts: list[str] = []
    for token in segment.tokens:
        if isinstance(token, Literal):
            parts.append(re.escape(token.char))
        elif isinstance(token, CharClass):
            body = "".join(
                re.escape(lo) if lo == hi else f"{re.escape(lo)}-{re.escape(hi)}" for lo, hi in token.ranges
            )
            parts.append(f"[{'^' if token.negated else ''}/{body}]" if token.negated else f"(?![/])[{body}]")
        elif token == _STAR:
            parts.append("[^/]*")
        else:
            parts.append("[^/]")
    return re.compile("".join(parts), re.DOTALL)


def segment_overlap(a: Segment, b: Segment) -> str | None:
    """A non-empty segment name both segments match, or None."""
    if a.literal or b.literal:  # the common case: a plain name against a name or a glob
        name, other = (a.text_name, b) if a.literal else (b.text_name, a)
        if not name:
            return None
        if other.literal:
            return name if other.text_name == name else None
        return name if _segment_regex(other).fullmatch(name) else None
    ta, tb = a.tokens, b.tokens

    @functools.cache
    def walk(i: int, j: int, produced: bool) -> str | None:
        if i == len(ta) and j == len(tb):
            return "" if produced else None
        x = ta[i] if i < len(ta) else None
        y = tb[j] if j < len(tb) else None
        if x == _STAR and y == _STAR:
            for step in ((i + 1, j), (i, j + 1)):
                found = walk(*step, produced)
                if found is not None:
                    return found
            tail = walk(i, j, True) if not produced else None
            return None if tail is None else "x" + tail
        if x == _STAR:
            found = walk(i + 1, j, produced)
            if found is None and y is not None:
                char = _char_both(_ANY, y)
                rest = None if char is None else walk(i, j + 1, True)
                found = None if rest is None or char is None else char + rest
            return found
        if y == _STAR:
            found = walk(i, j + 1, produced)
            if found is None and x is not None:
                char = _char_both(x, _ANY)
                rest = None if char is None else walk(i + 1, j, True)
                found = None if rest is None or char is None else char + rest
            return found
        if x is None or y is None:
            return None
        char = _char_both(x, y)
        if char is None:
            return None
        rest = walk(i + 1, j + 1, True)
        return None if rest is None else char + rest

    return walk(0, 0, False)


_ANY_SEGMENT: Final = Segment((_STAR,), "*")  # a whole name: what '**' takes per step


def _literal_path(tokens: tuple[PathToken, ...]) -> tuple[str, ...] | None:
    """The names of a plain path with what is under it (``src/api/users.py``), else None."""
    if len(tokens) < 2 or tokens[-1] != GLOBSTAR:
        return None
    names: list[str] = []
    for token in tokens[:-1]:
        if isinstance(token, str) or not token.literal:
            return None
        names.append(token.text_name)
    return tuple(names)


@functools.lru_cache(maxsize=65536)
def _plain(pattern: str) -> tuple[str, ...] | None:
    return _literal_path(structure(pattern))


def overlap(a: str, b: str) -> str | None:
    """A file path both normalised patterns cover (a witness), or None when none exists."""
    la, lb = _plain(a), _plain(b)
    if la is not None and lb is not None:  # two plain paths: one must lead to the other
        short, long = (la, lb) if len(la) <= len(lb) else (lb, la)
        return "/".join(long) if long[: len(short)] == short else None
    sa, sb = structure(a), structure(b)
    if la is not None or lb is not None:  # a plain path against a pattern without inner '**'
        plain, other = (la, sb) if la is not None else (lb, sa)
        assert plain is not None
        found = _plain_against(plain, other)
        if found is not _UNDECIDED:
            return found if isinstance(found, str) else None

    @functools.cache
    def walk(i: int, j: int) -> tuple[str, ...] | None:
        if i == len(sa) and j == len(sb):
            return ()
        x = sa[i] if i < len(sa) else None
        y = sb[j] if j < len(sb) else None
        for star, other, skip, consume in ((x, y, (i + 1, j), (i, j + 1)), (y, x, (i, j + 1), (i + 1, j))):
            if star != GLOBSTAR:
                continue
            rest: tuple[str, ...] | None = walk(skip[0], skip[1])  # "**" matching no segment
            if rest is not None:
                return rest
            if other == GLOBSTAR:
                continue  # the other '**' skips in its own turn
            if isinstance(other, Segment):  # '**' taking the segment the other matches
                name = segment_overlap(_ANY_SEGMENT, other)
                rest = None if name is None else walk(consume[0], consume[1])
                if name is not None and rest is not None:
                    return (name, *rest)
            return None
        if GLOBSTAR in (x, y):
            return None
        if x is None or y is None:
            return None
        assert isinstance(x, Segment) and isinstance(y, Segment)
        name = segment_overlap(x, y)
        if name is None:
            return None
        rest = walk(i + 1, j + 1)
        return None if rest is None else (name, *rest)

    found = walk(0, 0)
    if found is None or not found:
        return None if found is None else _nonempty(sa, sb)
    return "/".join(found)


_UNDECIDED: Final = object()


def _name_matches(segment: Segment, name: str) -> bool:
    return (
        segment.text_name == name if segment.literal else _segment_regex(segment).fullmatch(name) is not None
    )


def _plain_against(path: tuple[str, ...], tokens: tuple[PathToken, ...]) -> object:
    """Overlap of a plain path (with what is under it) and a pattern whose only ``**`` is
    its last token, by walking both once: the witness, None, or :data:`_UNDECIDED` for a
    pattern with an inner ``**`` (left to the general walk)."""
    tail = bool(tokens) and tokens[-1] == GLOBSTAR
    segments = tokens[:-1] if tail else tokens
    if any(not isinstance(t, Segment) for t in segments):
        return _UNDECIDED
    names = list(path)
    for index, segment in enumerate(segments):
        assert isinstance(segment, Segment)
        if index < len(path):
            if not _name_matches(segment, path[index]):
                return None
        else:  # deeper than the path: any name the segment matches lies under it
            name = segment_overlap(_ANY_SEGMENT, segment)
            if name is None:
                return None
            names.append(name)
    if len(segments) < len(path) and not tail:
        return None
    return "/".join(names)


def _nonempty(sa: Sequence[PathToken], sb: Sequence[PathToken]) -> str | None:
    """Both walks ended having matched no segment: only possible when both patterns are
    all ``**`` (the whole repository), which share every path."""
    if all(t == GLOBSTAR for t in sa) and all(t == GLOBSTAR for t in sb):
        return "x"
    return None


# -- the index ------------------------------------------------------------------------------------


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    here: dict[str, set[str]] = field(default_factory=dict)
    """Owner key -> the owner's patterns filed at this node."""
    below: int = 0
    """How many (owner, pattern) entries are filed at or under this node."""


class PatternIndex:
    """Patterns of many owners (leases) filed by their literal leading directories."""

    def __init__(self) -> None:
        self._root = _Node()
        self._patterns: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._patterns)

    def __contains__(self, owner: str) -> bool:
        return owner in self._patterns

    def add(self, owner: str, patterns: Iterable[str]) -> None:
        self.discard(owner)
        kept = tuple(dict.fromkeys(patterns))
        self._patterns[owner] = kept
        for pattern in kept:
            node = self._root
            node.below += 1
            for name in literal_prefix(pattern):
                node = node.children.setdefault(name, _Node())
                node.below += 1
            node.here.setdefault(owner, set()).add(pattern)

    def discard(self, owner: str) -> None:
        kept = self._patterns.pop(owner, None)
        if kept is None:
            return
        for pattern in kept:
            trail = [self._root]
            for name in literal_prefix(pattern):
                trail.append(trail[-1].children[name])
            mine = trail[-1].here.get(owner)
            if mine is not None:
                mine.discard(pattern)
                if not mine:
                    del trail[-1].here[owner]
            for node in trail:
                node.below -= 1
            for depth in range(len(trail) - 1, 0, -1):
                if trail[depth].below == 0:
                    del trail[depth - 1].children[literal_prefix(pattern)[depth - 1]]

    def patterns_of(self, owner: str) -> tuple[str, ...]:
        return self._patterns.get(owner, ())

    def candidates(self, pattern: str) -> Iterator[tuple[str, str]]:
        """(owner, pattern) pairs that may overlap ``pattern``: those filed on its path
        from the root and those filed under its own place."""
        node = self._root
        yield from _entries(node)
        for name in literal_prefix(pattern):
            child = node.children.get(name)
            if child is None:
                return
            node = child
            yield from _entries(node)
        stack = list(node.children.values())
        while stack:
            below = stack.pop()
            yield from _entries(below)
            stack.extend(below.children.values())

    def overlapping(self, patterns: Iterable[str]) -> Iterator[tuple[str, str, str, str]]:
        """(owner, their pattern, the given pattern, a shared path) for every overlap."""
        for mine in patterns:
            for owner, theirs in self.candidates(mine):
                witness = overlap(mine, theirs)
                if witness is not None:
                    yield owner, theirs, mine, witness


def _entries(node: _Node) -> Iterator[tuple[str, str]]:
    for owner, patterns in node.here.items():
        for pattern in patterns:
            yield owner, pattern
