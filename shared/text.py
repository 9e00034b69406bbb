"""Short texts every part shows people (pure: Shuttle uses it too): a text cut to a length,
folded to one line, and the exact command that answers a question."""

from __future__ import annotations

import shlex


def cut(text: str, most: int) -> str:
    """``text`` itself when it fits, else its first ``most - 1`` characters and an ellipsis."""
    return text if len(text) <= most else text[: most - 1] + "…"


def one_line(text: object, most: int) -> str:
    """``text`` with its whitespace folded to single spaces, then :func:`cut`."""
    return cut(" ".join(str(text or "").split()), most)


def answer_command(question_id: str, choices: list[str] | None) -> str:
    """The exact command that answers a question (its first choice when it has choices,
    quoted for a shell; else a placeholder to replace)."""
    answer = shlex.quote(choices[0]) if choices else '"<your answer>"'
    return f"shuttle answer {question_id} {answer}"
