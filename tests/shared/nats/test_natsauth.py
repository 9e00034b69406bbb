"""Scoped NATS auth without a server: JWTs, creds files, an agent's permission list, and the
identity a process takes from its credentials (the server side is in tests/weft)."""

from __future__ import annotations

import base64
import json

import pytest
from pydantic import SecretStr

from shared.identity import IdentityError, bound_to_credential
from shared.names import GLOBAL_REGISTRY_BUCKET, PUBLIC_MEMORY_BUCKET, ProjectNames, agent_access
from shared.nats.auth import (
    AgentCredential,
    CredentialsError,
    Issuer,
    Permissions,
    agent_credential,
    agent_of,
    decode_jwt,
    parse_creds,
)
from shared.settings import IdentitySettings, NatsSettings

AGENT = "a" * 32
OTHER = "b" * 32


def test_a_user_jwt_is_signed_by_its_account_and_says_whose_it_is() -> None:
    issuer = Issuer.generate()
    tags = {"loom-role": "agent", "loom-project": "p", "loom-agent": AGENT, "loom-user": "1" * 16}
    creds, key = issuer.user_creds("x", Permissions.everything(), expires_at=2_000_000_000, tags=tags)
    jwt, seed = parse_creds(creds)
    claims = decode_jwt(jwt)
    assert claims["sub"] == key and claims["iss"] == issuer.account and claims["exp"] == 2_000_000_000
    assert claims["nats"]["pub"] == {"allow": [">"]} and seed.decode().startswith("SU")
    assert agent_of(jwt) == AgentCredential("p", AGENT, "1" * 16, 2_000_000_000)
    account = decode_jwt(issuer.account_jwt({key: 5}))
    assert account["iss"] == decode_jwt(issuer.operator_jwt())["sub"]
    assert account["nats"]["revocations"] == {key: 5}
    assert account["nats"]["default_permissions"] == {"pub": {"deny": [">"]}, "sub": {"deny": [">"]}}
    # a changed claim breaks the signature
    head, body, sig = jwt.split(".")
    raw = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw["nats"]["pub"] = {"allow": ["$JS.API.>"]}
    forged = base64.urlsafe_b64encode(json.dumps(raw).encode()).rstrip(b"=").decode()
    with pytest.raises(CredentialsError, match="not a valid signed JWT"):
        decode_jwt(f"{head}.{forged}.{sig}")
    assert agent_of(issuer.user_creds("weft", Permissions.everything())[0].split("\n")[1]) is None


def test_a_bad_creds_file_is_named_not_repeated() -> None:
    with pytest.raises(CredentialsError) as caught:
        parse_creds("SUSECRETSEEDTHATMUSTNOTAPPEAR")
    assert "NATS_CREDS" in str(caught.value) and "SUSECRET" not in str(caught.value)
    settings = NatsSettings(creds_content=SecretStr("SUSECRETSEEDTHATMUSTNOTAPPEAR"))
    with pytest.raises(CredentialsError) as again:
        agent_credential(settings)
    assert "NATS_CREDS_CONTENT" in str(again.value) and "SUSECRET" not in str(again.value)


def test_issuer_files_round_trip_and_refuse_the_wrong_kind_of_seed() -> None:
    issuer = Issuer.generate()
    assert Issuer.from_json(issuer.to_json()) == issuer
    swapped = json.loads(issuer.to_json())
    swapped["operator_seed"], swapped["account_seed"] = swapped["account_seed"], swapped["operator_seed"]
    with pytest.raises(CredentialsError, match="operator_seed"):
        Issuer.from_json(json.dumps(swapped))
    with pytest.raises(CredentialsError, match="not a Loom NATS issuer file"):
        Issuer.from_json("{}")


def test_an_agents_permissions_name_only_its_project_its_own_keys_and_shared_buckets() -> None:
    names = ProjectNames("alpha")
    access = agent_access(names, AGENT, user_id="1" * 16, channels=["roadmap"])
    shared = (GLOBAL_REGISTRY_BUCKET, PUBLIC_MEMORY_BUCKET, "loom-_user-1111111111111111-memory")
    for subject in access.publish:
        assert "alpha" in subject or any(b in subject for b in shared) or subject == "$JS.API.INFO", subject
        assert ">" not in subject.split(".")[:-1], subject  # '>' only as the last token
        for verb in ("DELETE", "PURGE", "UPDATE", "STREAM.CREATE", "DURABLE"):
            assert f".{verb}." not in subject or "MSG.DELETE" in subject, subject
        assert OTHER not in subject
    own = [
        s
        for s in access.publish
        if s.startswith(("$KV.loom-alpha-agents.", f"$KV.{GLOBAL_REGISTRY_BUCKET}."))
    ]
    assert own == [f"$KV.loom-alpha-agents.{AGENT}", f"$KV.{GLOBAL_REGISTRY_BUCKET}.{AGENT}"]
    protocol = {f"agents.{verb}.loom.alpha.{AGENT}" for verb in ("prompt", "status")}
    discovery = {f"$SRV.{v}{t}" for v in ("PING", "INFO", "STATS") for t in ("", ".agents", ".agents.*")}
    assert access.subscribe[:2] == (f"_INBOX.{AGENT}.>", f"loom.alpha.control.{AGENT}")
    assert set(access.subscribe[2:]) == protocol | discovery  # its own prompts, and discovery
    assert f"agents.hb.loom.alpha.{AGENT}" in access.publish  # its own heartbeats, no one else's
    assert not any(s.startswith("agents.") and AGENT not in s for s in access.publish)
    assert not any("DIRECT.GET.LOOM-alpha-INBOX" in s for s in access.publish)
    assert len(Permissions.of(access).claims()["pub"]["allow"]) == len(access.publish)


def test_credentials_bind_the_identity_and_refuse_variables_that_disagree() -> None:
    credential = AgentCredential("alpha", AGENT, "1" * 16, None)
    bound = bound_to_credential(IdentitySettings(), credential)
    assert (bound.project_id, bound.agent_id, bound.instance, bound.user_id) == ("alpha", AGENT, 0, "1" * 16)
    assert (
        bound_to_credential(IdentitySettings(project_id="alpha", agent_id=AGENT), credential).agent_id
        == AGENT
    )
    for wrong, variable in (
        ({"project_id": "beta"}, "LOOM_PROJECT_ID"),
        ({"agent_id": OTHER}, "LOOM_AGENT_ID"),
        ({"instance": 2}, "LOOM_INSTANCE"),
        ({"subagent_type": "reviewer"}, "LOOM_SUBAGENT_TYPE"),
    ):
        with pytest.raises(IdentityError) as caught:
            bound_to_credential(IdentitySettings(**wrong), credential)  # type: ignore[arg-type]
        assert str(caught.value).startswith(variable), caught.value
    plain = IdentitySettings(project_id="beta")
    assert bound_to_credential(plain, None) is plain
