"""The deploy files against the real Weft, Warp and settings classes: probes hit
routes that exist and answer without a token, the Deployment's environment
starts Weft, every variable name in the manifests is one the code reads, and
the workflow and agent image accept what Weft's spin-up mechanisms send."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from deploy_weft_process import running_weft
from starlette.routing import Match

from deploy.checks.common import DEPLOY, REPO
from deploy.checks.kustomize import OVERLAYS, render
from deploy.runner import launch
from deploy.runner.config import RUNNER_VARIABLES, SHARED_WITH_WARP, load
from deploy.runner.credentials import NATS_KEYS
from shared.nats.auth import Issuer
from shared.nats.server import EmbeddedNatsServer, ServerConfig
from shared.settings import IdentitySettings, LoomSettings, NatsSettings
from testsupport.serving import CLIENT_TIMEOUT_S
from warp.settings import WarpSettings
from weft.app import create_app
from weft.settings import WeftSettings
from weft.spinup.mechanisms.base import Launch
from weft.spinup.mechanisms.github_actions import GithubActionsConfig, dispatch_inputs
from weft.spinup.settings import SpinupSettings

Doc = dict[str, Any]
WORKFLOW = DEPLOY / "github-actions" / "agent.yml"


def find(docs: list[Doc], kind: str, name: str) -> Doc:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def weft_container(overlay: str = "dev") -> Doc:
    deployment = find(render(OVERLAYS / overlay), "Deployment", "weft")
    container: Doc = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


# -- which variables exist -------------------------------------------------------------

NATS_VARS = set(launch.settings_variables(NatsSettings))
IDENTITY_VARS = set(launch.settings_variables(IdentitySettings))
WEFT_VARS = set(launch.settings_variables(WeftSettings)) | set(launch.settings_variables(SpinupSettings))  # type: ignore[arg-type]


def literal_env_reads(*folders: str) -> set[str]:
    """Variables the code reads directly: os.environ.get("X") / env.get("X") (the settings
    classes' variables are listed from the classes)."""
    found: set[str] = set()
    pattern = re.compile(r'(?:environ|env|e)\.get\(\s*"([A-Z][A-Z0-9_]+)"')
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for match in pattern.finditer(path.read_text(encoding="utf-8")):
                found.add(match.group(1))
    return found


SHARED_READS = literal_env_reads("shared") | set(launch.settings_variables(LoomSettings))  # type: ignore[arg-type]
WARP_VARS = literal_env_reads("warp") | set(launch.settings_variables(WarpSettings))  # type: ignore[arg-type]


def test_the_variable_lists_are_not_empty_by_accident() -> None:
    assert {"NATS_URL", "NATS_PASS", "NATS_TLS_CA"} <= NATS_VARS
    assert {"LOOM_PROJECT_ID", "LOOM_AGENT_ID", "LOOM_AGENT_TYPE"} <= IDENTITY_VARS
    assert {"WEFT_API_TOKENS", "WEFT_PORT", "WEFT_POLICY_FILE", "WEFT_AGENT_NATS_URL"} <= WEFT_VARS
    assert {"LOOM_JS_REPLICAS", "LOOM_DATA_DIR"} <= SHARED_READS
    assert {"LOOM_CAPABILITIES", "LOOM_AUTO_REGISTER", "LOOM_SPINUP_ID", "LOOM_BOUNDARIES"} <= WARP_VARS


def unknown(names: set[str], allowed: set[str]) -> list[str]:
    return sorted(names - allowed)


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_weft_deployment_env_names_match_the_settings_classes(overlay: str) -> None:
    names = {e["name"] for e in weft_container(overlay)["env"]}
    assert unknown({n for n in names if n.startswith("NATS_")}, NATS_VARS) == []
    assert unknown({n for n in names if n.startswith("WEFT_")}, WEFT_VARS) == []
    assert unknown({n for n in names if n.startswith("LOOM_")}, IDENTITY_VARS | SHARED_READS) == []
    assert unknown(names, NATS_VARS | WEFT_VARS | IDENTITY_VARS | SHARED_READS) == []
    assert {"NATS_URL", "WEFT_NATS_AUTH", "WEFT_NATS_ISSUER", "WEFT_API_TOKENS", "WEFT_POLICY_FILE"} <= names
    assert not {"NATS_USER", "NATS_PASS"} & names  # Weft mints its own credentials (scoped auth)


def test_compose_env_names_match_the_settings_classes() -> None:
    services = yaml.safe_load((DEPLOY / "docker" / "compose.yaml").read_text())["services"]
    weft = set(services["weft"]["environment"])
    assert unknown(weft, NATS_VARS | WEFT_VARS | IDENTITY_VARS | SHARED_READS) == []
    agent = set(services["agent"]["environment"])
    runner_vars = set(RUNNER_VARIABLES) | set(SHARED_WITH_WARP)
    assert unknown(agent, NATS_VARS | IDENTITY_VARS | runner_vars | WARP_VARS) == []


def test_workflow_env_names_are_read_by_the_runner_warp_or_shared_code() -> None:
    data = yaml.safe_load(WORKFLOW.read_text())
    job = data["jobs"]["agent"]
    names = set(job["env"])
    for step in job["steps"]:
        names |= set(step.get("env") or {})
    names -= {"AGENT_INSTALL", "JOB_STATUS"}  # used by the step's own shell line
    allowed = (
        NATS_VARS | IDENTITY_VARS | SHARED_READS | WARP_VARS | set(RUNNER_VARIABLES) | set(SHARED_WITH_WARP)
    )
    assert unknown(names, allowed) == []


def test_runner_variables_are_what_it_documents() -> None:
    code = "\n".join(p.read_text() for p in (DEPLOY / "runner").glob("*.py"))
    for name in RUNNER_VARIABLES:
        assert f'"{name}"' in code.replace(f'    "{name}": ', "", 1), f"{name} is listed but never read"
    docs = (REPO / "docs" / "deploy.md").read_text()
    assert unknown({n for n in RUNNER_VARIABLES | SHARED_WITH_WARP if n not in docs}, set()) == []


def test_warp_environment_uses_only_variables_warp_or_shared_code_read() -> None:
    env = {
        "LOOM_CORRELATION_ID": "run-1",
        "LOOM_CAPABILITIES": "code",
        "LOOM_PROJECT_ID": "p1",
        "LOOM_TARGET_ID": "t1",
        "LOOM_WORK_ID": "0" * 32,
        "NATS_URL": "wss://a:b@nats.example.com",
        "AGENT_COMMAND": "agent",
        "LOOM_WARP_COMMAND": "warp",
        "LOOM_JS_REPLICAS": "3",
    }
    warp_env = launch.warp_environment(load(env), env)
    assert unknown(set(warp_env), NATS_VARS | IDENTITY_VARS | WARP_VARS | SHARED_READS) == []


def test_the_dev_overlay_has_no_shared_agent_password() -> None:
    """Every agent gets credentials of its own from Weft: no Secret with a NATS user or password."""
    for secret in [d for d in render(OVERLAYS / "dev") if d["kind"] == "Secret"]:
        assert not set(secret.get("stringData") or {}) & set(NATS_KEYS), secret["metadata"]["name"]


# -- probes ------------------------------------------------------------------------------


def routes_matching(path: str) -> list[object]:
    app = create_app(WeftSettings(project_id="deploy-test"))
    scope = {
        "type": "http",
        "path": path,
        "method": "GET",
        "root_path": "",
        "headers": [],
        "query_string": b"",
    }
    return [route for route in app.routes if route.matches(scope)[0] == Match.FULL]


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_probes_hit_routes_that_exist(overlay: str) -> None:
    container = weft_container(overlay)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    for probe in ("readinessProbe", "livenessProbe"):
        action = container[probe]["httpGet"]
        assert routes_matching(action["path"]), f"{probe}: no Weft route serves GET {action['path']}"
        assert ports[action["port"]] == int(env["WEFT_PORT"]), f"{probe}: port is not where Weft listens"
    assert not routes_matching("/no-such-route")


def test_the_image_healthcheck_and_metrics_paths_exist() -> None:
    source = (DEPLOY / "docker" / "healthcheck.py").read_text()
    assert 'path: str = "/health"' in source and routes_matching("/health")
    assert routes_matching("/metrics")


def resolved_env(container: Doc, docs: list[Doc]) -> dict[str, str]:
    """The container's env with ConfigMap and Secret references resolved from the rendering."""
    env: dict[str, str] = {}
    for entry in container["env"]:
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
            continue
        ref = entry["valueFrom"]
        if "configMapKeyRef" in ref:
            env[entry["name"]] = find(docs, "ConfigMap", ref["configMapKeyRef"]["name"])["data"][
                ref["configMapKeyRef"]["key"]
            ]
        elif "secretKeyRef" in ref:
            env[entry["name"]] = find(docs, "Secret", ref["secretKeyRef"]["name"])["stringData"][
                ref["secretKeyRef"]["key"]
            ]
    return env


def secret_file(docs: list[dict[str, Any]], name: str, key: str) -> str:
    return str(find(docs, "Secret", name)["stringData"][key])


async def test_the_deployment_environment_starts_weft_and_its_probes_answer_without_a_token(
    tmp_path: Path,
) -> None:
    """Weft started with the dev overlay's env (only addresses and file paths swapped for local
    ones) against a nats-server with the dev overlay's operator configuration: Weft signs its
    own credentials with the dev issuer; /health answers 200 without a token, the API demands one."""
    docs = render(OVERLAYS / "dev")
    auth = secret_file(docs, "loom-nats-operator", "auth.conf").replace("/data/jwt", str(tmp_path / "jwt"))
    issuer = tmp_path / "issuer.json"
    issuer.write_text(secret_file(docs, "loom-nats-issuer", "issuer.json"))
    server = EmbeddedNatsServer(ServerConfig(extra=auth)).start()
    container = find(docs, "Deployment", "weft")["spec"]["template"]["spec"]["containers"][0]
    env = resolved_env(container, docs)
    policy_mount = next(m for m in container["volumeMounts"] if m["name"] == "config")["mountPath"]
    policy = tmp_path / "boundary-policy.yaml"
    policy.write_text(find(docs, "ConfigMap", "weft-config")["data"]["boundary-policy.yaml"])
    assert env["WEFT_POLICY_FILE"] == f"{policy_mount}/boundary-policy.yaml"
    assert env["WEFT_NATS_AUTH"] == "scoped" and env["WEFT_NATS_ISSUER"].startswith("/etc/loom-nats/")
    env.update(
        {
            "WEFT_HOST": "127.0.0.1",
            "NATS_URL": server.url,
            "WEFT_NATS_ISSUER": str(issuer),
            "WEFT_POLICY_FILE": str(policy),
            "LOOM_DATA_DIR": str(tmp_path / "data"),
            "LOOM_JS_REPLICAS": "1",  # one test server instead of the three-node cluster
            "WEFT_PORT": "",
        }
    )
    admin = env["WEFT_API_TOKENS"].split(",")[0].removeprefix("admin:")
    try:
        await _serve_and_probe(env, tmp_path, admin)
    finally:
        server.stop()
    seed = Issuer.from_json(issuer.read_text()).account_seed.decode()
    assert seed not in (tmp_path / "weft.log").read_text()


async def _serve_and_probe(env: dict[str, str], tmp_path: Path, admin: str) -> None:
    async with (
        running_weft(env, tmp_path / "weft.log") as base,
        httpx.AsyncClient(base_url=base, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        health = await client.get("/health")
        assert health.status_code == 200 and health.json()["nats"] == "connected"
        assert health.json()["project_id"] == "loom-dev"
        assert (await client.get("/metrics")).status_code == 200
        assert (await client.get("/api/work")).status_code == 401
        authorised = await client.get("/api/work", headers={"Authorization": f"Bearer {admin}"})
        assert authorised.status_code == 200
        minted = await client.post("/api/agents/credentials", headers={"Authorization": f"Bearer {admin}"})
        assert minted.status_code == 201, minted.text  # scoped auth is on
        port = base.rsplit(":", 1)[1]
        check = await asyncio.create_subprocess_exec(
            sys.executable,
            str(DEPLOY / "docker" / "healthcheck.py"),
            "http",
            env={"WEFT_PORT": port},
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(check.communicate(), timeout=30)
        assert check.returncode == 0, err


# -- what Weft's spin-up mechanisms send ------------------------------------------------------


def launch_for(work_id: str | None = "1" * 32) -> Launch:
    return Launch(
        spinup_id="a" * 32,
        agent_id="b" * 32,
        project_id="proj-a",
        target_id="c" * 32,
        target_name="gha",
        nats_url="wss://nats.loom.example.com",
        work_id=work_id,
        agent_type="claude-code",
        capabilities=("code",),
    )


@pytest.mark.parametrize(
    ("nats_url", "creds"),
    [("wss://nats.loom.example.com", None), ("wss://agent:pw@nats.loom.example.com", None),
     ("wss://nats.loom.example.com", "the run's own creds")],
)  # fmt: skip
def test_the_workflow_declares_every_input_weft_dispatches(nats_url: str, creds: str | None) -> None:
    """GitHub refuses a dispatch with an undeclared input or without a required one."""
    config = GithubActionsConfig(repository="owner/repo", workflow="agent.yml", inputs={"capability": "code"})
    launch = Launch(**{**launch_for().__dict__, "nats_url": nats_url, "nats_creds": creds})
    sent = dispatch_inputs(config, launch)
    assert sent.get("nats_creds") == creds
    inputs = yaml.safe_load(WORKFLOW.read_text())[True]["workflow_dispatch"]["inputs"]
    assert set(sent) <= set(inputs), f"undeclared: {set(sent) - set(inputs)}"
    required = {name for name, spec in inputs.items() if spec.get("required")}
    assert required <= set(sent)
    assert sent[config.correlation_input] == "a" * 32


def test_the_agent_image_runner_accepts_a_kubernetes_jobs_environment() -> None:
    """Weft's kubernetes Job env (Launch.env) plus the target's env, as docs/deploy.md configures it."""
    env = {
        **launch_for().env(),
        "NATS_URL": "nats://nats.loom.svc.cluster.local:4222",
        "LOOM_RUNNER_ALLOW_INSECURE": "1",
        "AGENT_COMMAND": "python -m deploy.runner.scripted_agent {mcp_config}",
        "LOOM_WARP_COMMAND": "warp",
    }
    config = load(env)
    assert config.correlation_id == config.spinup_id == "a" * 32
    assert config.agent_id == "b" * 32 and config.capabilities == ("code",)
    warp_env = launch.warp_environment(config, env)
    launch.check_warp_environment(warp_env)
    assert warp_env["LOOM_SPINUP_ID"] == "a" * 32 and warp_env["LOOM_TARGET_ID"] == "c" * 32
    manual = {**env, **launch_for(work_id=None).env(), "NATS_URL": env["NATS_URL"]}
    assert load(manual).work_id is None
