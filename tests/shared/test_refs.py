"""shared.refs: the one rule for what a person types for a record (full id, name, id prefix)."""

from __future__ import annotations

import pytest

from shared.errors import Invalid, NotFound
from shared.refs import MIN_PREFIX, Ambiguous, Candidate, resolve

A = Candidate("ab12" + "0" * 28, ("fix-login",))
B = Candidate("ab13" + "1" * 28, ("write-docs",))
C = Candidate("cd00" + "2" * 28, ("ab12",))  # a name that looks like A's id prefix


def find(ref: object, *candidates: Candidate) -> tuple[str, str]:
    found = resolve(ref, candidates or (A, B, C), field="ref", what="work item")
    return found.id, found.matched


def test_a_full_id_a_name_and_a_unique_prefix_each_name_one_record() -> None:
    assert find(A.id) == (A.id, "id")
    assert find("write-docs") == (B.id, "name")
    assert find("ab13") == (B.id, "prefix")
    assert find("cd00" + "2" * 10) == (C.id, "prefix")


def test_a_name_wins_over_an_id_prefix_it_looks_like() -> None:
    assert find("ab12") == (C.id, "name")
    assert find("ab12", A, B) == (A.id, "prefix")


def test_too_short_prefixes_match_nothing() -> None:
    with pytest.raises(NotFound) as missing:
        find("ab1")
    assert missing.value.field == "ref" and str(MIN_PREFIX) in missing.value.message
    assert "ab1" not in missing.value.message.split("(")[0]


def test_an_ambiguous_prefix_is_refused_with_the_matching_ids() -> None:
    twin = Candidate("ab12" + "f" * 28)
    with pytest.raises(Ambiguous) as refused:
        find("ab12", A, twin)
    assert refused.value.ids == sorted([A.id, twin.id]) and refused.value.field == "ref"
    assert "give more of the id" in refused.value.message
    many = [Candidate(f"ab12{i:028x}") for i in range(9)]
    with pytest.raises(Ambiguous) as crowded:
        find("ab12", *many)
    assert "names 9 work items" in crowded.value.message and crowded.value.message.count("ab12") == 5


def test_a_name_two_records_carry_is_refused() -> None:
    twins = (Candidate("e" * 32, ("vm-loom",)), Candidate("f" * 32, ("vm-loom",)))
    with pytest.raises(Ambiguous) as refused:
        find("vm-loom", *twins)
    message = refused.value.message
    assert message.startswith("ref: names 2 work items") and "e" * 32 in message and "f" * 32 in message
    assert "vm-loom" not in message and refused.value.rule == "one match"
    assert refused.value.ids == ["e" * 32, "f" * 32]


@pytest.mark.parametrize("bad", ["", " ab12", "x" * 257, None, 12])
def test_bad_references_are_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(Invalid) as refused:
        find(bad)
    assert refused.value.field == "ref" and refused.value.message.startswith("ref: must be")
    assert "x" * 20 not in refused.value.message


def test_unknown_references_say_what_is_accepted_without_echoing() -> None:
    with pytest.raises(NotFound) as missing:
        find("s3cr3t-T0KEN")
    assert missing.value.message.startswith("ref: no work item matches") and "s3cr3t" not in str(
        missing.value
    )
