"""Scoped API tokens: read < operate < admin, a 403 naming the missing scope (issue 24)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_weft_auth import api_operations
from weft_helpers import WsClient, ws_connect

from weft.settings import WeftSettings
from weft.tokens import ApiScope, parse_api_tokens, scope_of

TOKENS = "read:tok-read,operate:tok-operate,admin:tok-admin,tok-bare"
TOKEN_OF = {
    ApiScope.READ: "tok-read",
    ApiScope.OPERATE: "tok-operate",
    ApiScope.ADMIN: "tok-admin",
}

# Every /api operation that is not a GET, and the scope it needs. A new route must be added
# here on purpose: the test below fails for any operation it does not know.
OPERATE_ROUTES = {
    ("POST", "/api/questions/answers"),
    ("POST", "/api/questions/{question_id}/defer"),
    ("POST", "/api/work"),
    ("POST", "/api/work/plan"),
    ("POST", "/api/contexts"),
    ("POST", "/api/contexts/{tree_id}/nodes"),
    ("POST", "/api/contexts/{tree_id}/nodes/{node_id}/versions"),
    ("POST", "/api/contexts/{tree_id}/nodes/{node_id}/tombstone"),
    ("PATCH", "/api/contexts/{tree_id}"),
    ("DELETE", "/api/contexts/{tree_id}"),
    ("POST", "/api/contexts/{tree_id}/restore"),
    ("POST", "/api/contexts/import"),
    ("POST", "/api/questions/{question_id}/answer"),
    ("POST", "/api/work/cancel-batch"),
    ("POST", "/api/work/{work_id}/cancel"),
    ("POST", "/api/work/{work_id}/retry"),
    ("POST", "/api/dlq/{work_id}/retry"),
    ("DELETE", "/api/dlq/{work_id}"),
    ("PUT", "/api/work/{work_id}/budget"),
    ("DELETE", "/api/leases/{lease_id}"),
    ("POST", "/api/work/{work_id}/restore"),
    ("PUT", "/api/pause"),
    ("DELETE", "/api/pause"),
}
READ_POSTS = {
    ("POST", "/api/contexts/{tree_id}/resolve"),  # a read whose question travels in the body
}
ADMIN_ROUTES = {
    ("PUT", "/api/notify/sinks/{name}"),
    ("DELETE", "/api/notify/sinks/{name}"),
    ("POST", "/api/notify/sinks/{name}/test"),
    ("PUT", "/api/autonomy"),
    ("DELETE", "/api/autonomy"),
    ("PUT", "/api/budgets/project"),
    ("PUT", "/api/budgets/targets/{target}"),
    ("POST", "/api/agents/shutdown-batch"),
    ("POST", "/api/agents/{agent_id}/shutdown"),
    ("POST", "/api/agents/credentials"),
    ("DELETE", "/api/agents/credentials/{user_key}"),
    ("POST", "/api/targets"),
    ("PATCH", "/api/targets/{target}"),
    ("DELETE", "/api/targets/{target}"),
    ("POST", "/api/targets/{target}/enable"),
    ("POST", "/api/targets/{target}/disable"),
    ("POST", "/api/targets/{target}/test"),
    ("POST", "/api/targets/{target}/spin-up"),
    ("PUT", "/api/repository"),
    ("DELETE", "/api/repository"),
}


def needed_scope(method: str, template: str) -> ApiScope:
    if (method, template) in ADMIN_ROUTES:
        return ApiScope.ADMIN
    if (method, template) in OPERATE_ROUTES:
        return ApiScope.OPERATE
    assert method == "GET" or (method, template) in READ_POSTS, (
        f"{method} {template}: classify this route's scope in {__file__}"
    )
    return ApiScope.READ


def forbidden(needed: ApiScope, held: ApiScope) -> dict[str, Any]:
    also = " or admin:<token>" if needed is not ApiScope.ADMIN else ""
    return {
        "error": "forbidden",
        "message": f"scope: this needs a token with the {needed.label} scope and the one given has "
        f"{held.label} (ask whoever runs Weft for one: they add it as {needed.label}:<token>{also} "
        "in WEFT_API_TOKENS)",
        "details": {"field": "scope", "rule": needed.label},
    }


def test_tokens_parse_into_scopes_and_bare_tokens_are_admin() -> None:
    tokens = parse_api_tokens(" read:r1 , OPERATE: o1,admin:a1,bare-one,")
    assert [(t.scope, t.secret.get_secret_value()) for t in tokens] == [
        (ApiScope.READ, "r1"),
        (ApiScope.OPERATE, "o1"),
        (ApiScope.ADMIN, "a1"),
        (ApiScope.ADMIN, "bare-one"),
    ]
    assert scope_of(tokens, "o1") is ApiScope.OPERATE
    assert scope_of(tokens, "bare-one") is ApiScope.ADMIN
    assert scope_of(tokens, "r1x") is None and scope_of(tokens, None) is None
    assert scope_of([], None) is ApiScope.ADMIN  # no tokens configured: open (loopback only)
    # the same secret under two scopes: the higher one counts
    assert scope_of(parse_api_tokens("read:same,admin:same"), "same") is ApiScope.ADMIN
    assert "r1" not in repr(tokens) and "a1" not in repr(WeftSettings(api_tokens="admin:a1", project_id="p"))


@pytest.mark.parametrize("raw", ["writer:Zq9SECRET42", "read:", "admin: ,read:x"])
def test_a_bad_entry_names_the_rule_not_the_token(raw: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_api_tokens(raw)
    message = str(caught.value)
    assert message.startswith("WEFT_API_TOKENS: must be comma-separated entries")
    assert "read, operate, admin" in message and "Zq9SECRET42" not in message


async def test_each_scope_reaches_its_routes_and_gets_403_naming_the_scope_elsewhere(
    weft_factory: Any, project_id: str
) -> None:
    async with weft_factory(project_id=project_id, api_tokens=TOKENS) as weft:
        async with weft.client() as anonymous:
            spec = (await anonymous.get("/openapi.json")).json()
        templates = {
            (method.upper(), path)
            for path, methods in spec["paths"].items()
            if path.startswith("/api")
            for method in methods
        }
        assert templates >= OPERATE_ROUTES | ADMIN_ROUTES
        for held, token in [*TOKEN_OF.items(), (ApiScope.ADMIN, "tok-bare")]:
            async with weft.client(token=token) as client:
                for method, template in sorted(templates):
                    concrete = re.sub(r"\{[^}]+\}", "0123456789abcdef0123456789abcdef", template)
                    concrete = concrete.replace(
                        "credentials/0123456789abcdef0123456789abcdef", f"credentials/U{'A' * 55}"
                    )
                    needed = needed_scope(method, template)
                    response = await client.request(method, concrete, json={})
                    if held >= needed:
                        assert response.status_code not in (401, 403), (held, method, template)
                        assert response.status_code < 500, (held, method, template, response.text)
                    else:
                        assert response.status_code == 403, (held, method, template, response.text)
                        assert response.json() == forbidden(needed, held), (method, template)
        assert len(api_operations(spec)) == len(templates)


async def test_a_read_token_cannot_register_a_target_and_nothing_is_written(
    weft_factory: Any, project_id: str
) -> None:
    target = {"name": "laptop", "capabilities": ["code"], "mechanism": "local"}
    target["config"] = {"command": ["true"]}
    async with weft_factory(project_id=project_id, api_tokens=TOKENS) as weft:
        for scope in (ApiScope.READ, ApiScope.OPERATE):
            async with weft.client(token=TOKEN_OF[scope]) as client:
                refused = await client.post("/api/targets", json=target)
                assert refused.status_code == 403 and "the admin scope" in refused.json()["message"]
                assert (await client.get("/api/targets")).json()["items"] == []
        async with weft.client(token=TOKEN_OF[ApiScope.ADMIN]) as admin:
            assert (await admin.post("/api/targets", json=target)).status_code == 201


async def test_any_valid_token_may_watch_events(weft_factory: Any, project_id: str) -> None:
    async with (
        weft_factory(project_id=project_id, api_tokens=TOKENS) as weft,
        ws_connect(f"{weft.ws_url}/api/ws?token=tok-read") as conn,
    ):
        assert (await WsClient(conn).next_of("welcome"))["project_id"] == project_id


async def test_docs_behind_tokens_need_only_read(weft_factory: Any, project_id: str) -> None:
    async with (
        weft_factory(project_id=project_id, api_tokens=TOKENS, public_docs=False) as weft,
        weft.client(token="tok-read") as reader,
    ):
        assert (await reader.get("/openapi.json")).status_code == 200
