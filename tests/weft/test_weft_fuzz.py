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


CONTEXTS = "/api/contexts"
"""The context-tree routes are fuzzed apart from the rest: their bodies (a whole exported tree)
are the slowest to generate, and two halves run side by side within the per-test timeout."""


def fuzz(spec: dict[str, Any], base_url: str, project: str, contexts: bool) -> tuple[int, list[str]]:
    """(requests sent, problems found), for the context-tree routes or all the others. Every
    request is pinned to one project so the run does not create a project per generated header."""
    schema = schemathesis.openapi.from_dict(spec)
    problems: list[str] = []
    sent = 0
    session = requests.Session()
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path.startswith(CONTEXTS) != contexts:
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
                    if not (isinstance(body, dict) and {"error", "message"} <= set(body)):
                        problems.append(f"{label}: not the error envelope: {response.text[:200]}")

            try:
                check()
            except (hypothesis.errors.Unsatisfiable, hypothesis.errors.FailedHealthCheck):
                continue
    return sent, problems


@pytest.mark.parametrize("contexts", [False, True], ids=["routes", "context-routes"])
async def test_generated_requests_never_get_a_5xx(weft: Any, project_id: str, contexts: bool) -> None:
    async with weft.client() as api:
        spec = (await api.get("/openapi.json")).json()
    sent, problems = await asyncio.to_thread(fuzz, spec, weft.base_url, project_id, contexts)
    assert sent > (100 if contexts else 200)
    assert problems == []
