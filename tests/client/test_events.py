"""How a watch names what it read again (loom/events.py): a record found final is the change
that ended it, so a skipped event still shows as ``work.completed`` with its result."""

from __future__ import annotations

from loom.events import recheck_kind
from shared.models import FINAL_WORK_STATES


def test_a_final_record_read_again_is_named_by_its_status_and_anything_else_is_a_recheck() -> None:
    final = {str(s) for s in FINAL_WORK_STATES}
    assert recheck_kind({"status": "completed"}, final) == "work.completed"
    assert recheck_kind({"status": "dead-lettered"}, final) == "work.dead-lettered"
    assert recheck_kind({"status": "in-progress"}, final) == "recheck"
    assert recheck_kind({}, final) == "recheck"
