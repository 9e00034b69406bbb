"""The drill's invariants (``scenario_harness/history.py``) on histories made by hand: each
rule finds the violation it is for, and passes what only looks like one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scenario_harness.history import (
    Completion,
    Grant,
    History,
    Release,
    Submission,
    double_grants,
    doubled,
    lost,
    token_disorder,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def grant(lease_id: str, holder: str, token: int, asked: float, answered: float, ttl_s: float = 5.0) -> Grant:
    at = T0 + timedelta(seconds=answered)
    return Grant(
        lease_id, holder, token, asked, answered, acquired_at=at, expires_at=at + timedelta(seconds=ttl_s)
    )


def test_lost_is_an_acknowledged_item_that_did_not_complete() -> None:
    history = History(
        submissions=[
            Submission(0, 1, "a", "weft0"),
            Submission(1, 2, "b", "weft1"),
            Submission(2, 4, None, "weft0"),  # never acknowledged: whatever became of it, not lost
        ]
    )
    records = {"a": {"status": "completed"}, "b": {"status": "queued"}}
    assert lost(history, records) == ["b"]
    assert lost(history, {"a": {"status": "completed"}}) == ["b"]  # no record at all: lost too
    assert lost(history, records | {"b": {"status": "completed"}}) == []


def test_doubled_counts_accepted_completions_only() -> None:
    history = History(
        completions=[
            Completion("a", "h0-a", 0, 1),
            Completion("b", "h1-a", 0, 1),
            Completion("a", "h2-b", 5, 6),
        ],
        refused_completions=[Completion("b", "h2-a", 2, 3)],
    )
    assert doubled(history) == {"a": 2}


def test_a_grant_before_the_holder_released_its_own_live_lease_is_a_double_grant() -> None:
    history = History(
        grants=[grant("A", "h0-a", 10, 0.0, 0.1), grant("B", "h1-a", 11, 0.5, 0.6)],
        releases=[Release("A", 1.0, 1.1, ok=True)],  # A's holder still held it at 1.0
    )
    (found,) = double_grants(history)
    assert "token 11" in found and "token 10" in found


def test_grants_that_only_look_like_double_grants() -> None:
    after_release = History(
        grants=[grant("A", "h0-a", 10, 0.0, 0.1), grant("B", "h1-a", 11, 1.0, 1.2)],
        releases=[Release("A", 0.5, 0.9, ok=True)],
    )
    release_overlapping = History(  # B asked before A's release answered, granted after it began
        grants=[grant("A", "h0-a", 10, 0.0, 0.1), grant("B", "h1-a", 11, 0.4, 0.7)],
        releases=[Release("A", 0.6, 0.8, ok=True)],
    )
    ended_by_weft = History(  # A's holder was cut off: Weft ended A, and its own release was refused
        grants=[grant("A", "h2-a", 10, 0.0, 0.1), grant("B", "h1-a", 11, 3.0, 3.1)],
        releases=[Release("A", 8.0, 8.1, ok=False)],
    )
    expired = History(  # A lapsed (a 1 s lease here) before B was granted
        grants=[grant("A", "h2-a", 10, 0.0, 0.1, ttl_s=1.0), grant("B", "h1-a", 11, 3.0, 3.1)],
        releases=[Release("A", 8.0, 8.1, ok=True)],
    )
    for history in (after_release, release_overlapping, ended_by_weft, expired):
        assert double_grants(history) == []


def test_tokens_must_grow_with_the_order_of_grants() -> None:
    in_order = History(grants=[grant("A", "h0-a", 10, 0.0, 0.1), grant("B", "h1-a", 14, 0.2, 0.3)])
    concurrent = History(grants=[grant("A", "h0-a", 14, 0.0, 0.5), grant("B", "h1-a", 12, 0.2, 0.3)])
    assert token_disorder(in_order) == []
    assert token_disorder(concurrent) == []  # overlapping asks: either order is possible
    backwards = History(grants=[grant("A", "h0-a", 14, 0.0, 0.1), grant("B", "h1-a", 12, 0.2, 0.3)])
    assert token_disorder(backwards) == ["token 12 asked after token 14 was granted"]
    reused = History(grants=[grant("A", "h0-a", 14, 0.0, 0.1), grant("B", "h1-a", 14, 0.2, 0.3)])
    assert "token 14 granted 2 times" in token_disorder(reused)
