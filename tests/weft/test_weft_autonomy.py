"""The autonomy policy and the operator's answers over REST: ``/api/autonomy`` (default,
set, compare-and-set, refusals naming the field, per project, the file Weft adopts),
questions listed by urgency, answered or put off in one call, and the sweeper giving a
bypass question its default."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import eventually

from shared.models import Priority, utcnow
from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from testsupport.work import work_queue

A = "a" * 32
SECRET = "ghp_Zq9TOKENsEcReT42xYwVb"


def book_of(nc: NatsClient, project_id: str) -> QuestionBook:
    return QuestionBook(nc, ProjectNames(project_id), work_queue(nc, ProjectNames(project_id)))


async def test_the_policy_is_read_set_and_forgotten_per_project(
    weft: Any, api: httpx.AsyncClient, project_id: str
) -> None:
    shown = (await api.get("/api/autonomy")).json()
    assert shown["stored"] is False and shown["policy"]["modes"] == {
        "P0": "sync",
        "P1": "async",
        "P2": "bypass",
        "P3": "log",
    }
    policy = {
        "modes": {"P1": "sync"},
        "rules": [{"category": "security", "mode": "sync"}],
        "bypass_after_s": 60,
    }
    put = await api.put("/api/autonomy", json=policy, params={"revision": 0})
    assert put.status_code == 200, put.text
    stored = put.json()["policy"]
    assert (
        stored["modes"]["P1"] == "sync"
        and stored["modes"]["P3"] == "log"
        and stored["updated_by"] == "operator"
    )
    stale = await api.put("/api/autonomy", json={}, params={"revision": 0})
    assert stale.status_code == 409 and stale.json()["details"]["field"] == "revision"
    for body, field in (
        ({"modes": {"P0": SECRET}}, "modes"),
        ({"rules": [{"category": SECRET, "mode": "sync"}]}, "category"),
        ({"rules": [{"mode": "log"}]}, "rules"),
        ({"bypass_after_s": 0}, "bypass_after_s"),
        ({"surprise": SECRET}, "surprise"),
    ):
        bad = await api.put("/api/autonomy", json=body)
        assert bad.status_code == 422, bad.text
        assert any(field in e["field"] for e in bad.json()["details"]["errors"]), bad.text
        assert SECRET not in bad.text
    async with weft.client(project=f"{project_id}-x") as theirs:
        assert (await theirs.get("/api/autonomy")).json()["stored"] is False
        missing = await theirs.delete("/api/autonomy")
        assert missing.status_code == 404 and missing.json()["details"]["field"] == "autonomy"
    wrong = stored["revision"] + 1
    assert (await api.delete("/api/autonomy", params={"revision": wrong})).status_code == 409
    assert (await api.delete("/api/autonomy")).status_code == 204
    assert (await api.get("/api/autonomy")).json()["stored"] is False


async def test_weft_adopts_its_policy_file_unless_the_project_set_its_own(
    weft_factory: Any, project_id: str, tmp_path: Path
) -> None:
    path = tmp_path / "autonomy.yaml"
    path.write_text("modes:\n  P1: sync\nbypass_after_s: 30\n")
    async with weft_factory(project_id=project_id, autonomy_file=path) as weft, weft.client() as api:
        shown = (await api.get("/api/autonomy")).json()
        assert shown["stored"] is True and shown["policy"]["updated_by"] == "file"
        assert (shown["policy"]["modes"]["P1"], shown["policy"]["bypass_after_s"]) == ("sync", 30)
        await api.put("/api/autonomy", json={"bypass_after_s": 99})
    path.write_text("bypass_after_s: 5\n")
    async with weft_factory(project_id=project_id, autonomy_file=path) as weft, weft.client() as api:
        kept = (await api.get("/api/autonomy")).json()["policy"]
        assert (kept["updated_by"], kept["bypass_after_s"]) == ("operator", 99)  # the operator's stands


async def test_questions_by_urgency_answered_and_put_off_in_one_call(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    book = book_of(nc, project_id)
    low = await book.ask(A, "rename?", priority=Priority.P1)
    high = await book.ask(A, "drop the table?", choices=["yes", "no"])  # unranked: P0
    other = await book.ask(A, "which port?", priority=Priority.P1, category="scope")
    listed = (await api.get("/api/questions")).json()["items"]
    assert [q["id"] for q in listed] == [high.id, low.id, other.id]
    assert [q["priority"] for q in listed] == ["P0", "P1", "P1"] and listed[2]["category"] == "scope"
    newest = (await api.get("/api/questions", params={"order": "newest"})).json()["items"]
    assert [q["id"] for q in newest] == [other.id, high.id, low.id]
    assert [
        q["id"] for q in (await api.get("/api/questions", params={"category": "scope"})).json()["items"]
    ] == [other.id]
    for params in ({"priority": "P9"}, {"order": "oldest"}):
        assert (await api.get("/api/questions", params=params)).status_code == 422
    bad_category = await api.get("/api/questions", params={"category": SECRET})
    assert bad_category.status_code == 400 and SECRET not in bad_category.text

    later = (utcnow() + timedelta(hours=2)).isoformat()
    batch = await api.post(
        "/api/questions/answers",
        json={
            "by": "alice",
            "answers": [
                {"question_id": high.id, "answer": "no"},
                {"question_id": low.id, "defer_until": later},
                {"question_id": other.id, "answer": "8080"},
                {"question_id": high.id, "answer": "yes"},  # answered a moment ago
                {"question_id": "0" * 32, "answer": "x"},
            ],
        },
    )
    assert batch.status_code == 200, batch.text
    body = batch.json()
    assert (body["answered"], body["deferred"], body["refused"]) == (2, 1, 2)
    results = body["results"]
    assert (
        results[0]["question"]["answered_by"] == "alice" and results[1]["question"]["deferred_by"] == "alice"
    )
    assert [r["error"]["code"] if r["error"] else None for r in results] == [
        None,
        None,
        None,
        "conflict",
        "not_found",
    ]
    for body_, field in (
        ({"answers": []}, "answers"),
        ({"answers": [{"question_id": high.id}]}, "answers"),
        ({"answers": [{"question_id": high.id, "answer": "x", "defer_until": later}]}, "answers"),
        ({"answers": [{"question_id": SECRET, "answer": "x"}]}, "question_id"),
    ):
        refused = await api.post("/api/questions/answers", json=body_)
        assert refused.status_code == 422, refused.text
        assert any(field in e["field"] for e in refused.json()["details"]["errors"]), refused.text
        assert SECRET not in refused.text

    put_off = await api.post(f"/api/questions/{low.id}/defer", json={"until": later, "by": "bob"})
    assert put_off.status_code == 200 and put_off.json()["deferred_by"] == "bob"
    past = await api.post(f"/api/questions/{low.id}/defer", json={"until": utcnow().isoformat()})
    assert past.status_code == 400 and past.json()["details"]["field"] == "until"
    naive = await api.post(f"/api/questions/{low.id}/defer", json={"until": "2030-01-01T00:00:00"})
    assert naive.status_code == 422
    closed = await api.post(f"/api/questions/{high.id}/defer", json={"until": later})
    assert closed.status_code == 409 and closed.json()["details"]["field"] == "question_id"


async def test_the_sweeper_answers_a_bypass_question_with_its_default(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    assert (await api.put("/api/autonomy", json={"bypass_after_s": 1})).status_code == 200
    asked = await book_of(nc, project_id).ask(A, "retry?", priority=Priority.P2, default_answer="retry")
    assert asked.mode.value == "bypass"

    async def defaulted() -> bool:
        stored, _ = await book_of(nc, project_id)._load(asked.id)  # the record, not a read that decides it
        return stored.status.value == "answered"

    await eventually(defaulted, what="the sweeper to answer the bypass question")
    shown = (await api.get(f"/api/questions/{asked.id}")).json()
    assert (shown["answer"], shown["answered_by"]) == ("retry", "policy")
