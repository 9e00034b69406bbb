"""shared.text: what Weft's narration, its notifications and Shuttle show people."""

from __future__ import annotations

from shared.text import answer_command, cut, one_line


def test_cut_and_one_line() -> None:
    assert cut("short", 10) == "short"
    assert cut("a" * 12, 10) == "a" * 9 + "…" and len(cut("a" * 12, 10)) == 10
    assert cut("two\nlines", 100) == "two\nlines"  # a body keeps its lines
    assert one_line("  two\n  lines\t here ", 100) == "two lines here"
    assert one_line(None, 5) == ""
    assert one_line("word " * 10, 8) == "word wo…"


def test_the_answer_command_quotes_for_a_shell() -> None:
    assert answer_command("q1", ["yes", "no"]) == "shuttle answer q1 yes"
    assert answer_command("q1", ["ship it; rm -rf /"]) == "shuttle answer q1 'ship it; rm -rf /'"
    assert answer_command("q1", None) == 'shuttle answer q1 "<your answer>"'
