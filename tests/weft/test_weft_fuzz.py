"""Bad input never gets a 5xx: schemathesis generates valid and invalid requests from /openapi.json
and sends them over real HTTP to a running Weft."""

from __future__ import annotations

import asyncio
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode

MAX_EXAMPLES = 12
UVICORN_REFUSAL = "Invalid HTTP request received."
H11_LIMIT = 16 * 1024
"""h11's default limit on a request's head: uvicorn answers a longer one with a plain 400."""


PARTS = {
    "context-routes": ("/api/contexts",),
    "a2a-routes": ("/a2a/", "/.well-known/"),
    "work-routes": ("/api/work",),
    "fleet-routes": ("/api/targets", "/api/agents", "/api/spinups", "/api/mechanisms"),
}
"""Route groups fuzzed apart from the rest, side by side within the per-test timeout: the
context-tree routes (their bodies, a whole exported tree, are the slowest to generate), the
A2A routes (three bindings' worth of operations), the work routes and the fleet's (targets,
agents, spin-ups). Generating is CPU work: the rest together took over the 120 s timeout
on a machine half as fast."""


def part_of(path: str) -> str:
    return next((name for name, prefixes in PARTS.items() if path.startswith(prefixes)), "routes")


def fuzz(spec: dict[str, Any], base_url: str, project: str, part: str) -> tuple[int, list[str]]:
    """(requests sent, problems found), for one group of routes (:data:`PARTS`, or all the
    others). Every request is pinned to one project so the run does not create a project per
    generated header."""
    schema = schemathesis.openapi.from_dict(spec)
    problems: list[str] = []
    sent = 0
    session = requests.Session()
    for result in schema.get_all_operations():
        operation = result.ok()
        if part_of(operation.path) != part:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis.settings(
                max_examples=MAX_EXAMPLES,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def check(case: Any) -> None:
                nonlocal sent
                headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "x-loom-project"}
                headers["X-Loom-Project"] = project
                case.headers = headers
                if case.query:
                    case.query = {k: v for k, v in case.query.items() if k != "project"}
                response = case.call(base_url=base_url, session=session, timeout=20)
                sent += 1
                label = f"{case.method} {case.formatted_path} -> {response.status_code}"
                if response.status_code >= 500:
                    problems.append(f"{label}: {response.text[:300]}")
                elif response.status_code >= 400:
                    if response.text == UVICORN_REFUSAL and len(response.request.url or "") > H11_LIMIT:
                        return  # refused by the HTTP server before any route: the request line is too long
                    body = response.json()
                    if not (isinstance(body, dict) and {"error", "message"} <= set(body)) and not a2a_error(
                        body
                    ):
                        problems.append(f"{label}: not the error envelope: {response.text[:200]}")

            try:
                check()
            except (hypothesis.errors.Unsatisfiable, hypothesis.errors.FailedHealthCheck):
                continue
    return sent, problems


def a2a_error(body: Any) -> bool:
    """The HTTP+JSON binding's own error shape (``{"error": {code, status, message}}``), which
    A2A clients read there instead of Weft's envelope."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and {"code", "status", "message"} <= set(error)


@pytest.mark.parametrize("part", ["routes", *PARTS])
async def test_generated_requests_never_get_a_5xx(weft: Any, project_id: str, part: str) -> None:
    async with weft.client() as api:
        spec = (await api.get("/openapi.json")).json()
    sent, problems = await asyncio.to_thread(fuzz, spec, weft.base_url, project_id, part)
    assert (
        sent
        > {"routes": 200, "context-routes": 100, "a2a-routes": 100, "work-routes": 100, "fleet-routes": 100}[
            part
        ]
    )
    assert problems == []
