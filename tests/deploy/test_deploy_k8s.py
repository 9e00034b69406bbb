"""Kubernetes manifests: every overlay renders, validates against the Kubernetes
schemas offline and passes the security and reference checks; the offline
renderer agrees with the real kustomize; broken copies fail."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.checks.common import REPO
from deploy.checks.k8s import check_documents, check_overlay, secret_references
from deploy.checks.k8s_schema import schema_errors, versions
from deploy.checks.kustomize import (
    OVERLAYS,
    differences,
    kustomize_binary,
    load_rendered,
    overlays,
    render,
    render_with_kustomize,
    resource_id,
)
from shared.nats.auth import Issuer

Doc = dict[str, Any]


def find(docs: list[Doc], kind: str, name: str) -> Doc:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found"
    return matches[0]


def test_overlays_are_dev_and_prod() -> None:
    assert overlays() == ["dev", "prod"]


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_overlay_passes_every_check(overlay: str) -> None:
    assert check_overlay(OVERLAYS / overlay) == []


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_offline_rendering_equals_kustomize_output(overlay: str) -> None:
    """deploy/k8s/rendered/* were produced by the real kustomize; the offline renderer must agree.

    Where a kustomize (or kubectl) binary is installed, also check the committed files are current.
    """
    committed = load_rendered(overlay)
    assert differences(render(OVERLAYS / overlay), committed) == []
    command = kustomize_binary()
    if command is not None:
        assert differences(render_with_kustomize(OVERLAYS / overlay, command), committed) == []


def test_every_rendered_document_is_schema_valid_for_old_and_new_kubernetes() -> None:
    assert versions()[0] == "1.29" and len(versions()) == 2
    for overlay in overlays():
        for doc in render(OVERLAYS / overlay):
            for version in versions():
                assert schema_errors(doc, version) == [], (overlay, resource_id(doc))


def test_weft_deployment_shape() -> None:
    base = render(OVERLAYS.parent / "base")
    weft = find(base, "Deployment", "weft")
    assert weft["spec"]["replicas"] == 2
    pod = weft["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == "weft"
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert {"requests", "limits"} <= set(container["resources"])
    assert find(render(OVERLAYS / "prod"), "Deployment", "weft")["spec"]["replicas"] == 3
    assert find(render(OVERLAYS / "dev"), "Deployment", "weft")["spec"]["replicas"] == 1
    pdb = find(base, "PodDisruptionBudget", "weft")
    assert pdb["spec"]["selector"]["matchLabels"] == weft["spec"]["selector"]["matchLabels"]


def test_boundary_policy_is_a_yaml_file_in_the_configmap_mounted_by_weft() -> None:
    base = render(OVERLAYS.parent / "base")
    config = find(base, "ConfigMap", "weft-config")
    policy = yaml.safe_load(config["data"]["boundary-policy.yaml"])
    assert policy["version"] == 1 and "boundaries" in policy
    pod = find(base, "Deployment", "weft")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v.get("configMap", {}).get("name") == "weft-config")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert any(value == f"{mount['mountPath']}/boundary-policy.yaml" for value in env.values())


def test_weft_may_only_manage_jobs_in_the_agents_namespace() -> None:
    """Jobs, and the one Secret per Job that carries its agent's NATS credentials (create and
    delete, never read); agents themselves get no rights at all."""
    base = render(OVERLAYS.parent / "base")
    assert not [d for d in base if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    grants: dict[str, list[Any]] = {}
    for binding in [d for d in base if d["kind"] == "RoleBinding"]:
        role = find(base, "Role", binding["roleRef"]["name"])
        assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "loom-agents"
        for subject in binding["subjects"]:
            grants.setdefault(f"{subject['namespace']}/{subject['name']}", []).extend(role["rules"])
    assert grants == {
        "loom/weft": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "delete"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete"]},
        ],
    }
    assert find(base, "ServiceAccount", "loom-agent")["metadata"]["namespace"] == "loom-agents"


def test_nats_is_a_three_node_jetstream_cluster_with_tls_websocket_ingress() -> None:
    base = render(OVERLAYS.parent / "base")
    nats = find(base, "StatefulSet", "nats")
    assert nats["spec"]["replicas"] == 3
    assert nats["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    conf = find(base, "ConfigMap", "nats-config")["data"]["nats.conf"]
    for needle in ("jetstream {", "store_dir: /data", "cluster {", "websocket {", "nats-2.nats-headless"):
        assert needle in conf
    ingress = find(base, "Ingress", "nats-websocket")
    assert ingress["spec"]["tls"][0]["secretName"]
    assert (
        ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"]["name"] == "websocket"
    )


def test_dev_overlay_defines_every_secret_it_reads_and_docs_name_them_for_prod() -> None:
    dev = render(OVERLAYS / "dev")
    secrets = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in dev if d["kind"] == "Secret"}
    for ns, name, key in secret_references(dev):
        assert key in secrets[(ns, name)]["stringData"], (ns, name, key)
    prod = render(OVERLAYS / "prod")
    assert not [d for d in prod if d["kind"] == "Secret"], "prod must not ship credentials"
    docs = (REPO / "docs" / "deploy.md").read_text()
    for ns, name, key in secret_references(prod):
        assert name in docs and key in docs, f"docs/deploy.md must tell operators to create {ns}/{name}:{key}"


# -- broken copies fail ---------------------------------------------------------------


def edit_yaml(path: Path, change: Callable[[list[Doc]], None]) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    before = yaml.safe_dump_all(docs)
    change(docs)
    after = yaml.safe_dump_all(docs, sort_keys=False)
    assert after != before
    path.write_text(after)


def weft_container(docs: list[Doc]) -> Doc:
    container: Doc = docs[0]["spec"]["template"]["spec"]["containers"][0]
    return container


BREAKAGES: dict[str, tuple[str, Callable[[list[Doc]], None], str]] = {
    "schema-type": (
        "base/weft/deployment.yaml",
        lambda d: d[0]["spec"].update(revisionHistoryLimit="five"),
        "k8s-schema",
    ),
    "schema-unknown-field": (
        "base/weft/deployment.yaml",
        lambda d: weft_container(d).update(imagePullPolcy="Always"),
        "k8s-schema",
    ),
    "schema-unknown-kind": ("base/weft/service.yaml", lambda d: d[0].update(kind="Servce"), "k8s-schema"),
    "root-user": (
        "base/weft/deployment.yaml",
        lambda d: d[0]["spec"]["template"]["spec"]["securityContext"].pop("runAsNonRoot"),
        "k8s-security",
    ),
    "no-probe": (
        "base/weft/deployment.yaml",
        lambda d: weft_container(d).pop("livenessProbe"),
        "k8s-security",
    ),
    "probe-port": (
        "base/weft/deployment.yaml",
        lambda d: weft_container(d)["readinessProbe"]["httpGet"].update(port="web"),
        "k8s-security",
    ),
    "no-limits": (
        "base/weft/deployment.yaml",
        lambda d: weft_container(d)["resources"].pop("limits"),
        "k8s-security",
    ),
    "writable-root": (
        "base/weft/deployment.yaml",
        lambda d: weft_container(d)["securityContext"].update(readOnlyRootFilesystem=False),
        "k8s-security",
    ),
    "service-selector": (
        "base/weft/service.yaml",
        lambda d: d[0]["spec"]["selector"].update({"app.kubernetes.io/name": "weft2"}),
        "k8s-references",
    ),
    "configmap-key": (
        "base/weft/deployment.yaml",
        lambda d: d[0]["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"][0].update(
            key="policy.yaml"
        ),
        "k8s-references",
    ),
    "rolebinding-role": (
        "base/agents/rbac.yaml",
        lambda d: d[1]["roleRef"].update(name="other"),
        "k8s-references",
    ),
    "role-wildcard": (
        "base/agents/rbac.yaml",
        lambda d: d[0]["rules"][0].update(verbs=["*"]),
        "k8s-references",
    ),
    "ingress-port": (
        "base/nats/ingress.yaml",
        lambda d: d[0]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"].update(
            name="ws"
        ),
        "k8s-references",
    ),
    "nats-conf-field": (
        "base/nats/configmap.yaml",
        lambda d: d[0]["data"].update(
            {"nats.conf": d[0]["data"]["nats.conf"].replace("store_dir", "store_dri")}
        ),
        "nats-config",
    ),
    "nats-conf-variable": (
        "base/nats/statefulset.yaml",
        lambda d: d[0]["spec"]["template"]["spec"]["containers"][0]["env"].pop(),
        "nats-config",
    ),
    "nats-conf-users": (
        "base/nats/configmap.yaml",
        lambda d: d[0]["data"].update(
            {"nats.conf": d[0]["data"]["nats.conf"] + "authorization { users: [{user: a, password: b}] }\n"}
        ),
        "nats-config",
    ),
    "nats-conf-no-operator": (
        "base/nats/configmap.yaml",
        lambda d: d[0]["data"].update(
            {"nats.conf": d[0]["data"]["nats.conf"].replace("include ./operator/auth.conf", "")}
        ),
        "nats-config",
    ),
    "nats-memory-resolver": (
        "overlays/dev/secrets.yaml",
        lambda d: d[1]["stringData"].update(
            {"auth.conf": re.sub(r"resolver: \{[^}]*\}", "resolver: MEMORY", d[1]["stringData"]["auth.conf"])}
        ),
        "nats-config",
    ),
    "nats-foreign-operator": (
        "overlays/dev/secrets.yaml",
        lambda d: d[1]["stringData"].update(
            {
                "auth.conf": re.sub(
                    r'operator: "[^"]+"',
                    f'operator: "{Issuer.generate().operator_jwt()}"',
                    d[1]["stringData"]["auth.conf"],
                )
            }
        ),
        "nats-config",
    ),
    "boundary-policy": (
        "base/weft/configmap.yaml",
        lambda d: d[0]["data"].update({"boundary-policy.yaml": "boundaries:\n  Bad Name: {}\n"}),
        "boundary-policy",
    ),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_broken_manifest_fails(k8s_copy: Path, breakage: str) -> None:
    relative, change, check = BREAKAGES[breakage]
    edit_yaml(k8s_copy / relative, change)
    findings = check_overlay(k8s_copy / "overlays" / "dev")
    assert check in {f.check for f in findings}, [str(f) for f in findings]


def test_the_unbroken_copy_passes(k8s_copy: Path) -> None:
    """The breakage tests fail because of their edit, not because of the copy."""
    assert check_overlay(k8s_copy / "overlays" / "dev") == []


def test_check_documents_reports_a_namespace_the_manifests_do_not_create() -> None:
    docs = render(OVERLAYS / "dev")
    docs = [d for d in docs if not (d["kind"] == "Namespace" and d["metadata"]["name"] == "loom-agents")]
    assert any("loom-agents" in f.message for f in check_documents(docs, "x"))
