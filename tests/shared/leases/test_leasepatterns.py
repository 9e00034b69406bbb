"""Lease patterns: normalisation, overlap between patterns (checked against pathspec's
own matching), and the index that keeps the check cheap with many leases."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.leases.patterns import (
    MAX_PATTERN,
    MAX_PATTERNS,
    PatternError,
    PatternIndex,
    literal_prefix,
    matches,
    normalise,
    normalise_all,
    overlap,
)

# -- normalisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_pattern", "canonical"),
    [
        ("src/api/**", "src/api/**"),
        ("  src//api/./x.py ", "src/api/x.py"),
        ("./Makefile", "/Makefile"),
        ("./src/api/", "src/api/"),
        ("*.md", "*.md"),
        ("./", "**"),
    ],
)
def test_patterns_are_normalised(given_pattern: str, canonical: str) -> None:
    assert normalise(given_pattern) == canonical


def test_an_absolute_path_inside_the_repository_is_made_relative() -> None:
    assert normalise("/work/repo/src/x.py", root="/work/repo") == "src/x.py"
    assert normalise("/work/repo/", root="/work/repo/") == "**"


SECRET = "s3cr3t-T0KEN-value"


@pytest.mark.parametrize(
    ("bad", "rule"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("../" + SECRET, "'..'"),
        (f"src/../../{SECRET}", "'..'"),
        (f"/work/other/{SECRET}", "absolute path outside the project"),
        (f"!{SECRET}", "negation"),
        (f"#{SECRET}", "comment"),
        (f"a\x00{SECRET}", "control characters"),
        ("a" * (MAX_PATTERN + 1), f"at most {MAX_PATTERN} characters"),
        ("/".join(["a"] * 65), "segments"),
    ],
)
def test_bad_patterns_are_refused_naming_the_field_not_the_value(bad: str, rule: str) -> None:
    with pytest.raises(PatternError) as caught:
        normalise(bad, "patterns.3", root="/work/repo")
    assert caught.value.field == "patterns.3"
    assert caught.value.message.startswith("patterns.3: ")
    assert rule in caught.value.message
    assert SECRET not in caught.value.message


def test_absolute_paths_outside_the_given_root_are_refused() -> None:
    with pytest.raises(PatternError, match="absolute path"):
        normalise("/work/other/x.py", root="/work/repo")
    with pytest.raises(PatternError, match="absolute path"):
        normalise("/work/repository2/x", root="/work/repo")


def test_pattern_lists_are_bounded_and_deduplicated() -> None:
    assert normalise_all(["a/", "a//", "./a/", "b"]) == ["a/", "/a/", "b"]
    with pytest.raises(PatternError, match="at least 1"):
        normalise_all([])
    with pytest.raises(PatternError, match=f"at most {MAX_PATTERNS}"):
        normalise_all([f"f{i}" for i in range(MAX_PATTERNS + 1)])
    with pytest.raises(PatternError) as caught:
        normalise_all(["ok", "../up"])
    assert caught.value.field == "patterns.1"
    with pytest.raises(PatternError, match="must be a list"):
        normalise_all("src/**")


# -- overlap ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("src/api/**", "src/api/users.py"),
        ("src/api", "src/api/users.py"),
        ("src/api/", "src/api/v1/users.py"),
        ("*.py", "src/api/users.py"),
        ("src/*/users.py", "src/api/*.py"),
        ("src/**/test_*.py", "src/api/tests/test_users.py"),
        ("**", "docs/readme.md"),
        ("src/[ab]pi/x", "src/?pi/x"),
        ("/Makefile", "Makefile"),
        ("Makefile", "sub/Makefile"),
        ("src/api/**", "src/**/*.py"),
        # as in .gitignore, a pattern naming a directory covers what is in it: a directory
        # notes.md/ may hold a .py file, so these overlap (the witness says where)
        ("*.md", "*.py"),
    ],
)
def test_overlapping_patterns(a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        witness = overlap(normalise(x), normalise(y))
        assert witness is not None
        assert matches(normalise(x), witness) and matches(normalise(y), witness)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("docs/*.md", "src/**"),
        ("src/api/**", "src/apiv2/x.py"),
        ("src/api/", "src/api"[:-1] + "x"),
        ("docs/*.md", "src/*.md"),
        ("a/*.py", "a/b/c.py"),
        ("/Makefile", "sub/Makefile"),
        ("src/[ab]pi", "src/[!ab]pi"),
    ],
)
def test_disjoint_patterns(a: str, b: str) -> None:
    assert overlap(normalise(a), normalise(b)) is None
    assert overlap(normalise(b), normalise(a)) is None


SEGMENTS = ["a", "b", "ab", "c.py", "x.md", "*", "?", "*.py", "[ab]", "[!a]*", "a*", "**"]
NAMES = ["a", "b", "ab", "c.py", "x.md", "bb", ".py", "ba", "x"]

patterns = st.builds(
    lambda lead, parts, trail: lead + "/".join(parts) + trail,
    st.sampled_from(["", "./", "**/"]),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4),
    st.sampled_from(["", "/"]),
)
paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=5).map("/".join)


@settings(max_examples=400, deadline=None)
@given(patterns, patterns, paths)
def test_no_path_both_patterns_match_is_missed(a: str, b: str, path: str) -> None:
    ca, cb = normalise(a), normalise(b)
    if matches(ca, path) and matches(cb, path):
        assert overlap(ca, cb) is not None


@settings(max_examples=400, deadline=None)
@given(patterns, patterns)
def test_every_witness_is_matched_by_both_patterns(a: str, b: str) -> None:
    ca, cb = normalise(a), normalise(b)
    witness = overlap(ca, cb)
    if witness is not None:
        assert matches(ca, witness), (ca, cb, witness)
        assert matches(cb, witness), (ca, cb, witness)


# -- index -----------------------------------------------------------------------------------------


def test_literal_prefix_is_where_a_pattern_sits() -> None:
    assert literal_prefix("src/api/*.py") == ("src", "api")
    assert literal_prefix("*.md") == ()
    assert literal_prefix("/Makefile") == ("Makefile",)
    assert literal_prefix("src/a?i/x") == ("src",)


def test_the_index_finds_exactly_what_a_full_scan_finds() -> None:
    rng = random.Random(7)
    dirs = ["src", "src/api", "src/api/v1", "docs", "tests", "web/ui"]
    leased = {}
    index = PatternIndex()
    for n in range(300):
        d = rng.choice(dirs)
        pattern = normalise(rng.choice([f"{d}/f{n}.py", f"{d}/**", f"{d}/*.md", f"*.t{n % 7}", f"{d}/"]))
        leased[f"lease{n}"] = pattern
        index.add(f"lease{n}", [pattern])
    for removed in rng.sample(sorted(leased), 100):
        index.discard(removed)
        del leased[removed]
    assert len(index) == len(leased)
    for query in ["src/api/x.py", "src/**", "docs/readme.md", "*.py", "web/", "other/file", "**"]:
        wanted = normalise(query)
        by_index = {owner for owner, *_ in index.overlapping([wanted])}
        by_scan = {owner for owner, pattern in leased.items() if overlap(wanted, pattern) is not None}
        assert by_index == by_scan, query


def test_discarding_the_last_pattern_under_a_directory_prunes_it() -> None:
    index = PatternIndex()
    index.add("one", ["src/api/x.py", "docs/*.md"])
    index.add("two", ["src/api/y.py"])
    index.discard("one")
    assert index.patterns_of("one") == ()
    assert [owner for owner, *_ in index.overlapping(["src/**"])] == ["two"]
    index.discard("two")
    assert list(index.candidates("**")) == []
    assert len(index) == 0
