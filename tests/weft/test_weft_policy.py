"""Boundary policy from Weft's policy file, enforced by the claims agents make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, register

from shared.names import ProjectNames
from shared.work.policy import config_bucket, read_policy
from testsupport.work import work_queue
from weft.routing import NO_AGENT_NO_TARGET

POLICY = """\
# corporate work only for Copilot agents; production for nobody but deployers
version: 1
boundaries:
  corporate:
    allowed_agent_types: [copilot]
  production:
    allowed_agent_types: [deployer]
    allowed_targets: [prod-runner]
"""


def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


async def test_forbidden_agent_type_never_claims_corporate_work_even_when_alone(
    weft_factory: Any, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    async with weft_factory(project_id=project_id, policy_file=policy_file(tmp_path)) as weft:
        claude = await register(nc, project_id, agent_type="claude-code", boundaries=("default", "corporate"))
        queue = work_queue(nc, ProjectNames(project_id))
        async with weft.client() as api:
            work = (
                await api.post(
                    "/api/work",
                    json={"task_id": "c", "description": "d", "capability": "code", "boundary": "corporate"},
                )
            ).json()

            async def routed() -> bool:
                item = (await api.get(f"/api/work/{work['id']}")).json()
                return item["waiting_reason"] == NO_AGENT_NO_TARGET

            # The only agent online is not allowed: routing says so, and claims find nothing.
            await eventually(routed, what="routing to record that no eligible agent is online")
            for _ in range(3):
                assert await queue.claim(claimant(claude)) is None
            assert (await api.get(f"/api/work/{work['id']}")).json()["status"] == "queued"

            copilot = await register(nc, project_id, agent_type="copilot", boundaries=("corporate",))
            taken = await queue.claim(claimant(copilot))
            assert taken is not None and taken.id == work["id"] and taken.assigned_to == copilot.agent_id


async def test_capability_mismatch_never_claims(api: Any, nc: NatsClient, project_id: str) -> None:
    reviewer = await register(nc, project_id, capabilities=("review",))
    queue = work_queue(nc, ProjectNames(project_id))
    work = (
        await api.post("/api/work", json={"task_id": "x", "description": "d", "capability": "code"})
    ).json()
    for _ in range(3):
        assert await queue.claim(claimant(reviewer)) is None
    assert (await api.get(f"/api/work/{work['id']}")).json()["status"] == "queued"


async def test_policy_is_published_to_default_and_lazily_to_named_projects(
    weft_factory: Any, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    other = f"{project_id}-p2"
    js = nc.jetstream()
    async with weft_factory(project_id=project_id, policy_file=policy_file(tmp_path)) as weft:
        published = await read_policy(await config_bucket(js, ProjectNames(project_id)))
        assert published.rule_for("corporate").allowed_agent_types == ["copilot"]
        async with weft.client(project=other) as api:
            assert (await api.get("/api/work")).status_code == 200
        lazily = await read_policy(await config_bucket(js, ProjectNames(other)))
        assert lazily.rule_for("production").allowed_targets == ["prod-runner"]
        # ...and the claim in that project enforces it.
        claude = await register(nc, other, agent_type="claude-code", boundaries=("corporate",))
        async with weft.client(project=other) as api:
            await api.post(
                "/api/work",
                json={"task_id": "c", "description": "d", "capability": "code", "boundary": "corporate"},
            )
        assert await work_queue(nc, ProjectNames(other)).claim(claimant(claude)) is None


async def test_bad_policy_file_is_refused_at_start(weft_factory: Any, tmp_path: Path) -> None:
    from shared.work.policy import PolicyError
    from weft.app import create_app
    from weft.settings import WeftSettings

    bad = tmp_path / "bad.yaml"
    bad.write_text("boundaries:\n  Corporate!:\n    allowed_agent_types: [copilot]\n")
    try:
        create_app(WeftSettings(policy_file=bad, project_id="p1"))
    except PolicyError as exc:
        assert "boundaries" in str(exc) and str(bad) in str(exc)
    else:
        raise AssertionError("an invalid policy file was accepted")
    missing = tmp_path / "missing.yaml"
    try:
        create_app(WeftSettings(policy_file=missing, project_id="p1"))
    except PolicyError as exc:
        assert "cannot read" in str(exc)
    else:
        raise AssertionError("a missing policy file was accepted")
