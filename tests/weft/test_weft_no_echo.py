"""Rejected input is never echoed back (issue 21, defect 2).

A token pasted into the wrong field must not come back in a response or a log
line. For every input of every /api route (taken from /openapi.json, so a new
route or field is covered without editing this file) a secret-looking value is
sent over real HTTP to a real Weft; whenever Weft refuses it, the value must be
nowhere in the answer or in Weft's log, and the answer must name the field.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NatsClient
from websockets.exceptions import InvalidStatus
from weft_helpers import WsClient, channel, ws_connect

from testsupport.servers import secret_inputs

SECRET = "ghp_Zq9TOKENsEcReT42xYwVb"
"""Looks like a credential, fits in a URL path segment, and breaks every rule of
every name, id, enum, number, boolean and cursor Weft accepts (upper case, '_', digits)."""

CLIENT_LOGGERS = ("httpx", "httpcore", "websockets.client")
"""The test's own HTTP clients log the URLs they request; Weft's log is everything else."""
HEX = "0" * 32
PATH_DEFAULTS = {
    "work_id": HEX,
    "agent_id": HEX,
    "target": "probe",
    "name": "roadmap",
    "question_id": HEX,
    "tree_id": HEX,
    "node_id": HEX,
    "lease_id": HEX,
}
BODY_BASES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/work"): {"task_id": "t-1", "description": "d", "capability": "code"},
    ("POST", "/api/work/cancel-batch"): {"work_ids": [HEX]},
    ("POST", "/api/agents/shutdown-batch"): {"agent_ids": [HEX]},
    ("POST", "/api/targets"): {"name": "probe-2", "mechanism": "local", "config": {"command": ["true"]}},
    ("POST", "/api/work/plan"): {"items": [{"task_id": "t-1", "description": "d", "capability": "code"}]},
    ("POST", "/api/questions/{question_id}/answer"): {"answer": "yes"},
    ("POST", "/api/contexts"): {"title": "t", "text": "root"},
    ("POST", "/api/contexts/import"): {
        "tree_id": HEX,
        "meta": {"title": "t"},
        "nodes": [{"id": HEX, "tree_id": HEX, "author": "weft-api", "text": "root", "tree": {"title": "t"}}],
    },
    ("POST", "/api/contexts/{tree_id}/nodes"): {"parent_id": HEX, "text": "x"},
    ("PUT", "/api/repository"): {"url": "/srv/app.git"},
    ("POST", "/api/work/{work_id}/restore"): {"checkpoint": "abcd"},
}
# Inputs where the secret is a valid value (free text, a target's own tags...): Weft
# stores or uses it as given, which is not an echo of rejected input.
FREE_TEXT = {
    ("POST", "/api/work", "body", "task_id"),
    ("POST", "/api/work", "body", "description"),
    ("POST", "/api/work/cancel-batch", "body", "reason"),
    ("POST", "/api/work/{work_id}/cancel", "body", "reason"),
    ("POST", "/api/agents/shutdown-batch", "body", "reason"),
    ("POST", "/api/agents/{agent_id}/shutdown", "body", "reason"),
    ("POST", "/api/targets", "body", "tags"),
    ("PATCH", "/api/targets/{target}", "body", "tags"),
    ("POST", "/api/questions/{question_id}/answer", "body", "answer"),
    ("POST", "/api/contexts", "body", "title"),
    ("POST", "/api/contexts", "body", "text"),
    ("POST", "/api/contexts/{tree_id}/nodes", "body", "text"),
    ("POST", "/api/contexts/{tree_id}/nodes/{node_id}/versions", "body", "text"),
    ("POST", "/api/contexts/{tree_id}/nodes/{node_id}/tombstone", "body", "reason"),
    ("PATCH", "/api/contexts/{tree_id}", "body", "title"),
    ("POST", "/api/contexts/import", "body", "warnings"),  # what an export said; an import finds its own
    ("PATCH", "/api/contexts/{tree_id}", "body", "description"),
    ("GET", "/api/leases", "query", "path"),  # any relative path is a valid one to ask about
    ("PUT", "/api/repository", "body", "target_branch"),  # a valid branch name for git
    ("PUT", "/api/repository", "body", "worktree_root"),  # a valid relative folder
    ("PUT", "/api/repository", "body", "gate"),  # any text is a valid argument of a command
    ("PUT", "/api/pause", "body", "reason"),
    ("GET", "/api/work/resolve", "query", "ref"),  # a task id is free text: a reference may be one
    ("GET", "/api/agents/resolve", "query", "ref"),
}


def inputs(spec: dict[str, Any]) -> list[tuple[str, str, str, str, Any]]:
    """(method, path template, location, name, bad value) for every input of every /api route."""
    found = []
    for path, methods in spec["paths"].items():
        if not path.startswith("/api"):
            continue
        for method, op in methods.items():
            for param in op.get("parameters", []):
                found.append((method.upper(), path, param["in"], param["name"], SECRET))
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body is not None:
                for name, bad, _ in secret_inputs(spec, body, SECRET):
                    found.append((method.upper(), path, "body", name, bad))
    return found


async def _send(
    api: httpx.AsyncClient, method: str, template: str, location: str, name: str, bad: Any
) -> httpx.Response:
    path_values = {key: value for key, value in PATH_DEFAULTS.items() if "{" + key + "}" in template}
    query: dict[str, Any] = {}
    headers: dict[str, str] = {}
    body: Any = None
    if location == "path":
        path_values[name] = bad
    elif location == "query":
        query[name] = bad
    elif location == "header":
        headers[name] = bad
    else:
        body = {**BODY_BASES.get((method, template), {}), name: bad}
    return await api.request(method, template.format(**path_values), params=query, headers=headers, json=body)


def _names_field(response: httpx.Response, name: str) -> bool:
    body = response.json()
    details = body.get("details") or {}
    fields = {e["field"] for e in details.get("errors", [])} | {details.get("field")}
    aliases = {name, name.lower(), "project" if name in ("X-Loom-Project", "project") else name}
    return bool(aliases & fields) or any(a in body["message"] for a in aliases)


async def test_no_rejected_input_comes_back_from_any_route(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = await api.post(
        "/api/targets", json={"name": "probe", "mechanism": "local", "config": {"command": ["true"]}}
    )
    assert created.status_code == 201, created.text
    subject = await channel(nc, project_id, "roadmap")
    await nc.jetstream().publish(subject, b"hello")
    spec = (await api.get("/openapi.json")).json()
    cases = inputs(spec)
    assert len(cases) > 90
    refused: list[tuple[str, str, str, str]] = []
    for method, template, location, name, bad in cases:
        response = await _send(api, method, template, location, name, bad)
        key = (method, template, location, name)
        if key in FREE_TEXT:  # a valid value; refused only for another reason, if at all
            assert response.status_code < 400 or SECRET not in response.text, (key, response.text)
            continue
        assert 400 <= response.status_code < 500, (key, response.text)
        assert SECRET not in response.text, (key, response.text)
        assert SECRET not in json.dumps(dict(response.headers)), key
        assert _names_field(response, name), (key, response.text)
        refused.append(key)
    assert len(refused) == len(cases) - len(FREE_TEXT)
    weft_side = [r for r in caplog.records if not r.name.startswith(CLIENT_LOGGERS)]
    assert not [r.getMessage() for r in weft_side if SECRET in r.getMessage() + str(r.exc_text)]


async def test_the_issue_examples_name_the_field_and_the_rule(api: httpx.AsyncClient) -> None:
    submitted = await api.post("/api/work", json={**BODY_BASES[("POST", "/api/work")], "capability": SECRET})
    assert submitted.status_code == 422
    rule = "must be lowercase letters, digits, '-' and '_', starting with a letter or digit, 1-64 characters"
    assert submitted.json()["message"] == f"capability: {rule}"
    assert submitted.json()["details"]["errors"] == [
        {"field": "capability", "location": "body", "message": rule, "type": "value_error"}
    ]
    listed = await api.get("/api/agents", params={"capability": SECRET})
    assert listed.status_code == 400
    assert listed.json() == {
        "error": "invalid",
        "message": f"capability: {rule}",
        "details": {"field": "capability", "rule": rule[len("must be ") :]},
    }
    project = await api.get("/api/work", headers={"X-Loom-Project": SECRET})
    assert project.status_code == 400 and project.json()["error"] == "invalid_project"
    assert project.json()["message"].startswith("project: must be lowercase letters")
    clash = await api.get("/api/work", params={"project": "alpha"}, headers={"X-Loom-Project": "beta"})
    assert clash.status_code == 400 and "alpha" not in clash.text and "beta" not in clash.text
    unknown = await api.get(f"/api/work/{'a' * 32}")
    assert unknown.json() == {
        "error": "not_found",
        "message": "work_id: no work item with this id in this project",
        "details": {"field": "work_id"},
    }
    extra = await api.post("/api/work", json={**BODY_BASES[("POST", "/api/work")], SECRET: 1, "colour": 2})
    fields = sorted(e["field"] for e in extra.json()["details"]["errors"])
    assert fields == ["*", "colour"] and SECRET not in extra.text


async def test_websocket_refusals_do_not_echo(weft: Any) -> None:
    for query in (
        f"topics={SECRET}",
        f"topics=work&{SECRET}=1",
        f"project={SECRET}",
        f"topics=stats&interval_s={SECRET}",
    ):
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(f"{weft.ws_url}/api/ws?{query}"):
                pass
        assert refused.value.response.status_code == 400, query
        assert SECRET.encode() not in refused.value.response.body, query
    async with ws_connect(f"{weft.ws_url}/api/ws") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        for bad in (
            {"type": SECRET},
            {"type": "subscribe", "topic": SECRET},
            {"type": "subscribe", "topic": "work", "filters": {SECRET: "x"}},
            {"type": "subscribe", "topic": "work", "filters": {"capability": {SECRET: 1}}},
            {"type": "subscribe", "topic": "stats", "filters": {"interval_s": SECRET}},
            {"type": "subscribe", "topic": "work", "id": SECRET * 4},
            {"type": "unsubscribe", "id": SECRET},
        ):
            await ws.send(bad)
            error = await ws.next_of("error")
            assert error["error"] == "invalid" and SECRET not in json.dumps(error), (bad, error)
