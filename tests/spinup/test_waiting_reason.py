"""What a person waiting on an item reads (``submit --wait``, ``watch``, the console): an agent
being started for it must not read like a failure, and each refusal is said in words."""

from __future__ import annotations

from weft.spinup.managed import WHY_NOT_NOW, waiting_reason
from weft.spinup.manager import SpinupDecision
from weft.spinup.store import Refusal


def deferred(*codes: str) -> SpinupDecision:
    return SpinupDecision(
        "deferred", "", refusals=[("t", Refusal(code, f"target t: {code}")) for code in codes]
    )


def test_an_agent_being_started_for_the_item_is_said_so() -> None:
    assert waiting_reason(deferred("work-in-flight")) == "waiting for an agent: one is being started for it"
    assert "cannot" not in waiting_reason(deferred("work-in-flight"))


def test_each_refusal_is_said_in_words_not_codes() -> None:
    reason = waiting_reason(deferred("cooldown", "max-concurrent", "cooldown"))
    assert reason == (
        "waiting for an agent: none can be started now "
        f"({WHY_NOT_NOW['cooldown']}; {WHY_NOT_NOW['max-concurrent']})"
    )
    assert waiting_reason(deferred("pause")).endswith("(the project is paused)")
    assert waiting_reason(deferred("something-new")).endswith("(something-new)")


def test_a_start_and_a_missing_target_keep_their_detail() -> None:
    started = SpinupDecision("started", "starting an agent on target laptop")
    assert waiting_reason(started) == "waiting for an agent: starting an agent on target laptop"
    assert waiting_reason(SpinupDecision("no-target", "no target offers code")).endswith(
        "no target offers code"
    )
