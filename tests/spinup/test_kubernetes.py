"""``kubernetes`` mechanism against a recording HTTPS stub of the API server."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from nats.aio.client import Client as NatsClient

from shared.models import SpinupState, Target, WorkSubmission
from shared.names import ProjectNames
from tests.spinup.conftest import EngineFactory, eventually, register_agent
from tests.spinup.stubs import Seen, StubServer
from testsupport.work import work_queue
from weft.spinup.mechanisms import parse_config
from weft.spinup.mechanisms.base import Launch, MechanismError
from weft.spinup.mechanisms.kubernetes import KubernetesMechanism

TOKEN = "k8s-sa-token-4c1d-do-not-leak"
MakeTarget = Callable[..., Awaitable[Target]]


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def apiserver(ca: trustme.CA) -> AsyncIterator[StubServer]:
    jobs: dict[str, dict[str, Any]] = {}

    def answer(seen: Seen) -> tuple[int, Any]:
        if seen.headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, {"kind": "Status", "message": "Unauthorized", "reason": "Unauthorized"}
        parts = seen.path.strip("/").split("/")
        if seen.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            allowed = seen.json()["spec"]["resourceAttributes"]["namespace"] == "agents"
            return 201, {"status": {"allowed": allowed}}
        if parts[:4] == ["apis", "batch", "v1", "namespaces"] and parts[5:6] == ["jobs"]:
            namespace = parts[4]
            if namespace == "locked":
                return 403, {"kind": "Status", "message": 'jobs.batch is forbidden in "locked"'}
            if seen.method == "GET" and len(parts) == 6:
                return 200, {"kind": "JobList", "items": []}
            if seen.method == "POST" and len(parts) == 6:
                job = seen.json()
                job["metadata"]["uid"] = "uid-" + job["metadata"]["name"]
                jobs[job["metadata"]["name"]] = job
                return 201, job
            if len(parts) == 7:
                name = parts[6]
                if name not in jobs:
                    return 404, {"kind": "Status", "message": f'jobs.batch "{name}" not found'}
                if seen.method == "DELETE":
                    return 200, {"kind": "Status", "status": "Success", "details": {"name": jobs.pop(name)}}
                return 200, {**jobs[name], "status": {"active": 1}}
        if parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["secrets"]:
            if seen.method == "POST" and len(parts) == 5:
                return 201, seen.json()
            if seen.method == "DELETE" and len(parts) == 6:
                return 200, {"kind": "Status", "status": "Success"}
        return 404, {"kind": "Status", "message": "not found"}

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = await StubServer(answer, tls=context).start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.crt"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def k8s_config(apiserver: StubServer, ca_file: str, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "api_url": apiserver.url,
        "token_env": "LOOM_TEST_K8S_TOKEN",
        "ca_file": ca_file,
        "namespace": "agents",
        "image": "ghcr.io/acme/loom-agent:1.2",
        "command": ["python", "-m", "weft.spinup.demo_agent"],
        "service_account": "loom-agent",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
        "labels": {"team": "platform"},
        "nats_url": "nats://nats.loom.svc:4222",
    }
    config.update(changes)
    return config


async def ignore(_: dict[str, str]) -> None:
    return None


LAUNCH = Launch(
    spinup_id="5" * 32,
    agent_id="a" * 32,
    project_id="proj-1",
    target_id="7" * 32,
    target_name="cluster",
    nats_url="nats://nats.loom.svc:4222",
    work_id="9" * 32,
    capabilities=("code",),
)


async def test_job_manifest_labels_env_and_delete_with_background_propagation(
    apiserver: StubServer, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOM_TEST_K8S_TOKEN", TOKEN)
    config = parse_config("kubernetes", k8s_config(apiserver, ca_file))
    mechanism = KubernetesMechanism()
    handle = await mechanism.start(config, LAUNCH, ignore)
    assert handle == {
        "job": "loom-agent-5555555555555555",
        "namespace": "agents",
        "uid": "uid-loom-agent-5555555555555555",
    }

    [create] = apiserver.calls("POST", "/apis/batch/v1/namespaces/agents/jobs")
    job = create.json()
    labels = {
        "team": "platform",
        "app.kubernetes.io/managed-by": "loom-weft",
        "loom.dev/project": "proj-1",
        "loom.dev/target": "cluster",
        "loom.dev/target-id": "7" * 32,
        "loom.dev/agent-id": "a" * 32,
        "loom.dev/spinup-id": "5" * 32,
    }
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["metadata"] == {"name": "loom-agent-5555555555555555", "namespace": "agents", "labels": labels}
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["ttlSecondsAfterFinished"] == 600
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"] == labels
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["serviceAccountName"] == "loom-agent"
    [container] = pod["spec"]["containers"]
    assert container["image"] == "ghcr.io/acme/loom-agent:1.2"
    assert container["command"] == ["python", "-m", "weft.spinup.demo_agent"]
    assert container["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NATS_URL"] == "nats://nats.loom.svc:4222" and env["LOOM_AGENT_ID"] == "a" * 32
    assert env["LOOM_PROJECT_ID"] == "proj-1" and env["LOOM_SPINUP_ID"] == "5" * 32
    assert env["LOOM_WORK_ID"] == "9" * 32 and env["LOOM_AUTO_REGISTER"] == "1"
    assert env["LOOM_CAPABILITIES"] == "code" and env["LOOM_TARGET_ID"] == "7" * 32
    assert TOKEN not in str(job)
    assert create.headers["Authorization"] == f"Bearer {TOKEN}"

    assert await mechanism.alive(config, handle) is True
    assert await mechanism.stop(config, handle) == "Job agents/loom-agent-5555555555555555 deleted"
    [delete] = apiserver.calls("DELETE")
    assert delete.path == "/apis/batch/v1/namespaces/agents/jobs/loom-agent-5555555555555555"
    assert delete.json() == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    assert await mechanism.alive(config, handle) is False
    assert await mechanism.stop(config, handle) == "Job agents/loom-agent-5555555555555555 was already gone"


async def test_in_cluster_credentials_from_the_service_account(
    apiserver: StubServer, ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(TOKEN + "\n")
    (account / "namespace").write_text("agents")
    ca.cert_pem.write_to_path(str(account / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(apiserver.port))
    config = parse_config("kubernetes", {"image": "agent:1"})
    mechanism = KubernetesMechanism(service_account_dir=account)
    result = await mechanism.probe(config, 5)
    assert result.ok is True and result.detail == "namespace agents: Jobs can be listed and created"
    assert [r.path for r in apiserver.requests] == [
        "/apis/batch/v1/namespaces/agents/jobs",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    ]
    review = apiserver.requests[1].json()
    assert review["spec"]["resourceAttributes"] == {
        "namespace": "agents",
        "verb": "create",
        "group": "batch",
        "resource": "jobs",
    }


async def test_refusals_are_failed_starts_and_unhealthy_probes(
    apiserver: StubServer, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOM_TEST_K8S_TOKEN", TOKEN)
    mechanism = KubernetesMechanism()
    locked = parse_config("kubernetes", k8s_config(apiserver, ca_file, namespace="locked"))
    with pytest.raises(MechanismError, match=r"Kubernetes refused the Job \(403\): jobs.batch is forbidden"):
        await mechanism.start(locked, LAUNCH, ignore)
    probe = await mechanism.probe(locked, 5)
    assert probe.ok is False and "cannot list Jobs in namespace locked (403)" in probe.detail
    other = parse_config("kubernetes", k8s_config(apiserver, ca_file, namespace="other"))
    assert (await mechanism.probe(other, 5)).detail == "not allowed to create Jobs in namespace other"

    monkeypatch.setenv("LOOM_TEST_K8S_TOKEN", "wrong-token-value")
    unauthorized = parse_config("kubernetes", k8s_config(apiserver, ca_file))
    with pytest.raises(MechanismError, match=r"\(401\): Unauthorized"):
        await mechanism.start(unauthorized, LAUNCH, ignore)

    untrusted = parse_config("kubernetes", k8s_config(apiserver, ca_file=None))
    result = await mechanism.probe(untrusted, 5)
    assert result.ok is False and "CERTIFICATE_VERIFY_FAILED" in result.detail

    with_credentials = Launch(**{**LAUNCH.__dict__, "nats_url": "nats://agent:pw@nats.loom.svc:4222"})
    monkeypatch.setenv("LOOM_TEST_K8S_TOKEN", TOKEN)
    with pytest.raises(MechanismError, match="carries credentials"):
        await mechanism.start(
            parse_config("kubernetes", k8s_config(apiserver, ca_file)), with_credentials, ignore
        )
    assert "pw@" not in str(apiserver.requests)


async def test_engine_starts_a_job_links_its_agent_and_deletes_the_job_when_idle(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    apiserver: StubServer,
    ca_file: str,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOOM_TEST_K8S_TOKEN", TOKEN)
    engine = await engine_factory(shutdown_grace_s=0.3)
    target = await make_target(
        name="cluster", mechanism="kubernetes", config=k8s_config(apiserver, ca_file), idle_timeout_s=0.5
    )
    item = await work_queue(nc, names).submit(WorkSubmission(task_id="k", description="d", capability="code"))
    decision = await engine.request_for_work(project_id, item)
    op = decision.operation
    assert op is not None, decision.detail
    manager = await engine.manager(project_id)

    async def state(*wanted: SpinupState) -> Any:
        record = await manager.store.get(op.id)
        return record if record.op.state in wanted else None

    running = await eventually(lambda: state(SpinupState.RUNNING), what="the Job to be created")
    job_name = running.op.handle["job"]
    [create] = apiserver.calls("POST", "/apis/batch/v1/namespaces/agents/jobs")
    labels = create.json()["metadata"]["labels"]
    assert labels["loom.dev/target"] == "cluster" and labels["loom.dev/agent-id"] == op.agent_id
    assert labels["loom.dev/project"] == project_id

    await register_agent(
        nc, project_id, op.agent_id, spinup_id=op.id, target_id=target.id, capabilities=["code"]
    )
    await eventually(lambda: state(SpinupState.STOPPED), what="idle shutdown")
    [delete] = apiserver.calls("DELETE")
    assert delete.path == f"/apis/batch/v1/namespaces/agents/jobs/{job_name}"
    assert delete.json()["propagationPolicy"] == "Background"


async def test_scoped_credentials_travel_in_a_secret_of_their_own_never_in_the_job(
    apiserver: StubServer, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOM_TEST_K8S_TOKEN", TOKEN)
    config = parse_config("kubernetes", k8s_config(apiserver, ca_file))
    creds = "-----BEGIN NATS USER JWT-----\neyJ0.x.y\n------END NATS USER JWT------\nSUAMADEUPSEEDFORTHETEST"
    launch = dataclasses.replace(LAUNCH, nats_creds=creds)
    assert creds not in repr(launch)
    handle = await KubernetesMechanism().start(config, launch, ignore)
    assert handle["secret"] == "loom-agent-5555555555555555-nats"
    [secret] = apiserver.calls("POST", "/api/v1/namespaces/agents/secrets")
    assert secret.json()["stringData"] == {"nats.creds": creds}
    assert secret.json()["metadata"]["name"] == handle["secret"]
    [create] = apiserver.calls("POST", "/apis/batch/v1/namespaces/agents/jobs")
    assert "SUAMADEUPSEED" not in create.body.decode()
    [container] = create.json()["spec"]["template"]["spec"]["containers"]
    [from_secret] = [e for e in container["env"] if e["name"] == "NATS_CREDS_CONTENT"]
    assert from_secret["valueFrom"] == {"secretKeyRef": {"name": handle["secret"], "key": "nats.creds"}}
    await KubernetesMechanism().stop(config, handle)
    assert [c.path for c in apiserver.calls("DELETE") if "secrets" in c.path] == [
        f"/api/v1/namespaces/agents/secrets/{handle['secret']}"
    ]
