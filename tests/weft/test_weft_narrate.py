"""weft/narrate.py: the line `weft serve`'s terminal shows for each fleet moment (pure)."""

from __future__ import annotations

from weft.narrate import line_of

P = "demo"


def test_spin_ups_say_where_the_agents_output_goes_and_when_it_joins_and_stops() -> None:
    op = {"target_name": "laptop", "agent_id": "a" * 32, "handle": {"stdout_log": "/data/spinups/x.log"}}
    running = line_of("spinup", "running", {"data": {"operation": op}}, P)
    assert running == "[demo] starting an agent on target laptop; its output: /data/spinups/x.log"
    joined = line_of("spinup", "registered", {"data": {"operation": op, "handle_name": "laptop-aaaaaaaa"}}, P)
    assert joined == "[demo] agent laptop-aaaaaaaa joined (target laptop)"
    stopped = line_of("spinup", "stopped", {"data": {"operation": op, "reason": "idle for 10s"}}, P)
    assert stopped == "[demo] agent on target laptop stopped: idle for 10s"
    assert line_of("spinup", "requested", {"data": {"operation": op}}, P) is None  # not every step


def test_work_that_ends_is_named_by_what_it_is() -> None:
    item = {"id": "c" * 32, "task_id": "fix-login", "description": "Fix the\nflaky login test"}
    done = line_of("work", "completed", {"data": {"item": item}}, P)
    assert done == "[demo] work fix-login (Fix the flaky login test) completed"  # one line, always
    dead = line_of("work", "dead-lettered", {"data": {"item": {**item, "error": "compiler exploded"}}}, P)
    assert dead is not None and dead.endswith("dead-lettered: compiler exploded")
    assert line_of("work", "progress", {"data": {"item": item}}, P) is None


def test_a_question_comes_with_the_line_that_answers_it() -> None:
    question = {
        "id": "9" * 32,
        "asked_by_handle": "design-bot",
        "priority": "P0",
        "question": "round or square?",
        "choices": ["round corners", "square"],
    }
    said = line_of("question", "asked", {"data": {"question": question}}, P)
    answer = f"shuttle answer {'9' * 32} 'round corners'"
    assert said == f"[demo] design-bot asks (P0): round or square? - answer with: {answer}"
    free = line_of("question", "asked", {"data": {"question": {**question, "choices": []}}}, P)
    assert free is not None and free.endswith('"<your answer>"')
    long = line_of("question", "asked", {"data": {"question": {**question, "question": "x " * 400}}}, P)
    assert long is not None and "…" in long and len(long) < 300
