"""Bearer-token auth: every /api route and the WebSocket need a token when WEFT_API_TOKENS is set."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from weft_helpers import WsClient, ws_connect

TOKENS = "first-token,second-token"
REST_401 = {  # no token given
    "error": "unauthorized",
    "message": "a bearer token is required and none was given (Authorization: Bearer <token>)",
    "details": None,
}
REST_401_REJECTED = {  # a token Weft does not know: told apart from none at all
    "error": "unauthorized",
    "message": "the bearer token given is not one this Weft accepts (Authorization: Bearer <token>; "
    "one of WEFT_API_TOKENS)",
    "details": None,
}
WS_HOW = "Sec-WebSocket-Protocol: bearer, <token>; or ?token=<token>; or Authorization: Bearer <token>"
WS_401 = {
    "error": "unauthorized",
    "message": f"a token is required and none was given ({WS_HOW})",
    "details": None,
}
WS_401_REJECTED = {
    "error": "unauthorized",
    "message": f"the token given is not one this Weft accepts ({WS_HOW}; one of WEFT_API_TOKENS)",
    "details": None,
}


def api_operations(openapi: dict[str, Any]) -> list[tuple[str, str]]:
    """(method, concrete path) for every /api operation in the contract."""
    ops: list[tuple[str, str]] = []
    for path, methods in openapi["paths"].items():
        if not path.startswith("/api"):
            continue
        concrete = re.sub(r"\{[^}]+\}", "0123456789abcdef0123456789abcdef", path)
        ops.extend((method.upper(), concrete) for method in methods)
    return ops


async def test_every_api_route_needs_a_valid_token(weft_factory: Any, project_id: str) -> None:
    async with weft_factory(project_id=project_id, api_tokens=TOKENS) as weft:
        async with weft.client() as anonymous:
            spec = (await anonymous.get("/openapi.json")).json()
            operations = api_operations(spec)
            assert len(operations) >= 25
            for method, path in operations:
                response = await anonymous.request(method, path, json={})
                assert response.status_code == 401, (method, path, response.status_code)
                assert response.json() == REST_401, (method, path)  # exact: nothing masked by redaction
                assert response.headers["www-authenticate"] == "Bearer"
            assert (await anonymous.get("/health")).status_code == 200
            assert (await anonymous.get("/metrics")).status_code == 200
        async with weft.client(token="wrong-token") as wrong:
            for method, path in operations:
                response = await wrong.request(method, path, json={})
                assert (response.status_code, response.json()) == (401, REST_401_REJECTED), (method, path)
        async with weft.client() as other_scheme:
            response = await other_scheme.get(
                "/api/work", headers={"Authorization": "Basic Zmlyc3QtdG9rZW4="}
            )
            assert (response.status_code, response.json()) == (401, REST_401)
        for token in TOKENS.split(","):
            async with weft.client(token=token) as allowed:
                for method, path in operations:
                    response = await allowed.request(method, path, json={})
                    assert response.status_code != 401, (method, path, response.text)
                    assert response.status_code < 500, (method, path, response.text)
                listed = await allowed.get("/api/work")
                assert listed.status_code == 200


async def test_docs_can_require_the_token_too(weft_factory: Any, project_id: str) -> None:
    async with weft_factory(project_id=project_id, api_tokens="tok-1", public_docs=False) as weft:
        async with weft.client() as anonymous:
            assert (await anonymous.get("/openapi.json")).status_code == 401
            assert (await anonymous.get("/docs")).status_code == 401
        async with weft.client(token="tok-1") as allowed:
            assert (await allowed.get("/openapi.json")).status_code == 200
            assert "swagger" in (await allowed.get("/docs")).text.lower()


async def test_websocket_rejects_bad_or_missing_token_and_accepts_good_ones(
    weft_factory: Any, project_id: str
) -> None:
    async with weft_factory(project_id=project_id, api_tokens=TOKENS) as weft:
        url = f"{weft.ws_url}/api/ws"
        for attempt, told in (
            ({"url": url}, WS_401),
            ({"url": f"{url}?token=nope"}, WS_401_REJECTED),
            ({"url": url, "subprotocols": ["bearer", "nope"]}, WS_401_REJECTED),
            ({"url": url, "additional_headers": {"Authorization": "Bearer nope"}}, WS_401_REJECTED),
        ):
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(**attempt):
                    pass
            assert refused.value.response.status_code == 401, attempt
            assert json.loads(refused.value.response.body) == told, attempt
        async with ws_connect(f"{weft.ws_url}/api/ws?token=first-token") as conn:
            assert (await WsClient(conn).next_of("welcome"))["project_id"] == project_id
        async with ws_connect(f"{weft.ws_url}/api/ws", subprotocols=["bearer", "second-token"]) as conn:  # type: ignore[list-item]
            assert conn.subprotocol == "bearer"
            assert (await WsClient(conn).next_of("welcome"))["project_id"] == project_id
        async with ws_connect(
            f"{weft.ws_url}/api/ws", additional_headers={"Authorization": "Bearer first-token"}
        ) as conn:
            assert (await WsClient(conn).next_of("welcome"))["type"] == "welcome"


async def test_without_tokens_configured_everything_is_open(api: Any) -> None:
    assert (await api.get("/api/work")).status_code == 200
    assert (await api.get("/api/agents")).status_code == 200


OPEN_ROUTES = {
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("GET", "/.well-known/agent-card.json"),  # A2A discovery: the card says how to authenticate
    ("GET", "/a2a/{project}/.well-known/agent-card.json"),
    ("POST", "/hooks/github"),  # GitHub's webhook: checked by its own signature instead
}


async def test_behind_tokens_only_the_probes_and_the_agent_cards_are_open(
    weft_factory: Any, project_id: str
) -> None:
    async with weft_factory(project_id=project_id, api_tokens=TOKENS) as weft, weft.client() as anonymous:
        spec = (await anonymous.get("/openapi.json", headers={"Authorization": "Bearer first-token"})).json()
        answered = {}
        for path, methods in spec["paths"].items():
            concrete = re.sub(
                r"\{[^}]+\}", "0123456789abcdef0123456789abcdef", path.replace("{project}", project_id)
            )
            for method in methods:
                answered[(method.upper(), path)] = (
                    await anonymous.request(method, concrete, json={})
                ).status_code
        assert {route for route, status in answered.items() if status != 401} == OPEN_ROUTES, answered
        card = (await anonymous.get(f"/a2a/{project_id}/.well-known/agent-card.json")).json()
    assert [skill["id"] for skill in card["skills"]] == ["work"] and "bearer" in card["securitySchemes"]
