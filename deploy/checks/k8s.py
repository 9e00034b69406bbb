"""Checks on rendered Kubernetes manifests.

1. schema: every document against the Kubernetes JSON schemas (strict), for
   the oldest supported and the newest bundled Kubernetes version;
2. security: every pod runs as non-root with a seccomp profile, no privilege
   escalation, a read-only root filesystem, all capabilities dropped, resource
   requests and limits, a pinned image; long-running pods have probes;
3. references: what one manifest names in another exists (Services and PDBs
   select pods, Ingresses reach named Service ports, probes use declared ports,
   ConfigMap keys, ServiceAccounts, Roles, the StatefulSet's headless Service);
4. NATS configuration in a ConfigMap passes ``nats-server -t`` (with the operator file it
   includes from a mounted Secret, or a stand-in of that shape when the Secret is made at
   install) and uses operator mode: no users in nats.conf, a full resolver, and an account
   whose users get no permission their JWT does not give. Also with exactly the
   variables the pod that mounts it defines.
"""

from __future__ import annotations

import base64
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from deploy.checks.common import Finding, display, find_tool, run_tool
from deploy.checks.k8s_schema import schema_errors, versions
from deploy.checks.kustomize import Document, KustomizeError, ResourceId, render, resource_id, split_image
from shared.nats.auth import CredentialsError, Issuer, decode_jwt, server_auth_config
from shared.work.policy import PolicyError, parse_policy

WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"})
LONG_RUNNING = frozenset({"Deployment", "StatefulSet", "DaemonSet"})


def pod_spec(doc: Document) -> dict[str, Any] | None:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    if kind in WORKLOADS:
        return (spec.get("template") or {}).get("spec")
    return None


def pod_labels(doc: Document) -> dict[str, str]:
    spec = doc.get("spec") or {}
    if doc.get("kind") == "Pod":
        return dict((doc.get("metadata") or {}).get("labels") or {})
    if doc.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {})


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


class Index:
    """Lookups across one rendering."""

    def __init__(self, docs: list[Document]) -> None:
        self.docs = docs
        self.by_id: dict[tuple[str, str, str], Document] = {}
        for doc in docs:
            rid = resource_id(doc)
            self.by_id[(rid.kind, rid.namespace, rid.name)] = doc

    def get(self, kind: str, namespace: str, name: str) -> Document | None:
        return self.by_id.get((kind, namespace, name))

    def workloads(self, namespace: str) -> list[Document]:
        return [d for d in self.docs if d.get("kind") in WORKLOADS and resource_id(d).namespace == namespace]

    def selected(self, namespace: str, selector: dict[str, str]) -> list[Document]:
        return [
            d
            for d in self.workloads(namespace)
            if selector and all(pod_labels(d).get(k) == v for k, v in selector.items())
        ]


# -- 2. security -------------------------------------------------------------------


def _container_problems(container: dict[str, Any], long_running: bool) -> list[str]:
    name = container.get("name", "?")
    problems: list[str] = []
    image = str(container.get("image", ""))
    _, tag, digest = split_image(image)
    if not digest and (not tag or tag == "latest"):
        problems.append(f"container {name}: image {image!r} must carry a version tag or digest")
    sc = container.get("securityContext") or {}
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"container {name}: securityContext.allowPrivilegeEscalation must be false")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"container {name}: securityContext.readOnlyRootFilesystem must be true")
    if sc.get("privileged"):
        problems.append(f"container {name}: must not be privileged")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        problems.append(f"container {name}: securityContext.capabilities.drop must include ALL")
    resources = container.get("resources") or {}
    for section in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            if resource not in (resources.get(section) or {}):
                problems.append(f"container {name}: resources.{section}.{resource} is required")
    ports = {p.get("name") for p in container.get("ports") or [] if p.get("name")}
    probes = ("readinessProbe", "livenessProbe")
    if long_running:
        problems += [f"container {name}: {probe} is required" for probe in probes if probe not in container]
    for probe in (*probes, "startupProbe"):
        action = container.get(probe) or {}
        for handler in ("httpGet", "tcpSocket", "grpc"):
            port = (action.get(handler) or {}).get("port")
            if isinstance(port, str) and port not in ports:
                problems.append(
                    f"container {name}: {probe} uses port {port!r}, which the container does not name"
                )
    return problems


def security(doc: Document) -> list[str]:
    spec = pod_spec(doc)
    if spec is None:
        return []
    problems: list[str] = []
    psc = spec.get("securityContext") or {}
    all_non_root = all((c.get("securityContext") or {}).get("runAsNonRoot") for c in containers(spec))
    if psc.get("runAsNonRoot") is not True and not all_non_root:
        problems.append("pod securityContext.runAsNonRoot must be true")
    if psc.get("runAsUser") == 0:
        problems.append("pod securityContext.runAsUser must not be 0")
    if (psc.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("pod securityContext.seccompProfile.type must be RuntimeDefault")
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        problems.append("pod must not use the host's network, PID or IPC namespace")
    long_running = doc.get("kind") in LONG_RUNNING
    for container in containers(spec):
        problems += _container_problems(container, long_running)
    return problems


# -- 3. references ------------------------------------------------------------------


def _pod_references(doc: Document, ns: str, index: Index) -> list[str]:
    spec = pod_spec(doc) or {}
    problems: list[str] = []
    account = spec.get("serviceAccountName")
    if account and account != "default" and index.get("ServiceAccount", ns, account) is None:
        problems.append(f"serviceAccountName {account!r} is not defined in namespace {ns}")
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    claim_names = {
        (t.get("metadata") or {}).get("name")
        for t in (doc.get("spec") or {}).get("volumeClaimTemplates") or []
    }
    for volume in volumes.values():
        cm = volume.get("configMap")
        if cm:
            target = index.get("ConfigMap", ns, cm.get("name", ""))
            if target is None:
                problems.append(f"volume {volume.get('name')}: ConfigMap {cm.get('name')!r} is not defined")
            else:
                for item in cm.get("items") or []:
                    if item.get("key") not in (target.get("data") or {}):
                        problems.append(
                            f"volume {volume.get('name')}: ConfigMap {cm.get('name')} "
                            f"has no key {item.get('key')!r}"
                        )
    for container in containers(spec):
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in volumes and mount.get("name") not in claim_names:
                problems.append(
                    f"container {container.get('name')}: volumeMount {mount.get('name')!r} has no volume"
                )
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("configMapKeyRef")
            if ref:
                target = index.get("ConfigMap", ns, ref.get("name", ""))
                if target is None or ref.get("key") not in (target.get("data") or {}):
                    problems.append(
                        f"container {container.get('name')}: env {env.get('name')} reads "
                        f"ConfigMap {ref.get('name')}/{ref.get('key')}, which is not defined"
                    )
    return problems


def references(doc: Document, index: Index) -> list[str]:
    kind = doc.get("kind")
    rid = resource_id(doc)
    ns = rid.namespace
    spec = doc.get("spec") or {}
    problems: list[str] = []
    if kind in WORKLOADS:
        problems += _pod_references(doc, ns, index)
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if kind != "Pod" and kind != "CronJob" and selector and index.selected(ns, selector) == []:
            problems.append("spec.selector does not match the pod template's labels")
    if kind == "StatefulSet":
        service = index.get("Service", ns, str(spec.get("serviceName", "")))
        if service is None or (service.get("spec") or {}).get("clusterIP") != "None":
            problems.append(f"serviceName {spec.get('serviceName')!r} must name a headless Service")
    if kind == "Service":
        pods = index.selected(ns, spec.get("selector") or {})
        if not pods:
            problems.append("spec.selector matches no pod template in this namespace")
        named = {
            p.get("name") for d in pods for c in containers(pod_spec(d) or {}) for p in c.get("ports") or []
        }
        for port in spec.get("ports") or []:
            target = port.get("targetPort")
            if isinstance(target, str) and target not in named:
                problems.append(
                    f"port {port.get('name')}: targetPort {target!r} is not a named container port"
                )
    if kind in ("PodDisruptionBudget", "NetworkPolicy"):
        selector = (spec.get("selector") if kind == "PodDisruptionBudget" else spec.get("podSelector")) or {}
        labels = selector.get("matchLabels") or {}
        if labels and not index.selected(ns, labels):
            problems.append("the selector matches no pod template in this namespace")
    if kind == "Ingress":
        for rule in spec.get("rules") or []:
            for path in (rule.get("http") or {}).get("paths") or []:
                backend = (path.get("backend") or {}).get("service") or {}
                service = index.get("Service", ns, str(backend.get("name", "")))
                if service is None:
                    problems.append(f"backend Service {backend.get('name')!r} is not defined")
                    continue
                port = backend.get("port") or {}
                ports = (service.get("spec") or {}).get("ports") or []
                if "name" in port and port["name"] not in {p.get("name") for p in ports}:
                    problems.append(
                        f"backend port {port['name']!r} is not a port of Service {backend.get('name')}"
                    )
                if "number" in port and port["number"] not in {p.get("port") for p in ports}:
                    problems.append(
                        f"backend port {port['number']} is not a port of Service {backend.get('name')}"
                    )
        hosts = {h for rule in spec.get("rules") or [] for h in [rule.get("host")] if h}
        tls_hosts = {h for entry in spec.get("tls") or [] for h in entry.get("hosts") or []}
        if hosts - tls_hosts:
            problems.append(f"hosts without TLS: {', '.join(sorted(hosts - tls_hosts))}")
    if kind == "RoleBinding":
        ref = doc.get("roleRef") or {}
        if ref.get("kind") == "Role" and index.get("Role", ns, str(ref.get("name", ""))) is None:
            problems.append(f"roleRef Role {ref.get('name')!r} is not defined in namespace {ns}")
        for subject in doc.get("subjects") or []:
            if (
                subject.get("kind") == "ServiceAccount"
                and index.get(
                    "ServiceAccount", str(subject.get("namespace", ns)), str(subject.get("name", ""))
                )
                is None
            ):
                problems.append(
                    f"subject ServiceAccount {subject.get('namespace')}/{subject.get('name')} is not defined"
                )
    if kind in ("Role", "ClusterRole"):
        for rule in doc.get("rules") or []:
            for field in ("verbs", "resources", "apiGroups"):
                if "*" in (rule.get(field) or []):
                    problems.append(f"rules: a wildcard in {field} grants more than Loom needs")
    if ns and kind != "Namespace" and index.get("Namespace", "", ns) is None:
        problems.append(f"namespace {ns!r} is not defined by these manifests")
    return problems


def secret_references(docs: Iterable[Document]) -> set[tuple[str, str, str]]:
    """(namespace, Secret name, key) pairs that pods read; they may live outside the manifests."""
    found: set[tuple[str, str, str]] = set()
    for doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        ns = resource_id(doc).namespace
        for container in containers(spec):
            for env in container.get("env") or []:
                ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    found.add((ns, str(ref.get("name")), str(ref.get("key"))))
    return found


# -- 4. NATS configuration ---------------------------------------------------------------


def nats_config_problems(
    text: str, variables: Iterable[str], files: dict[str, str] | None = None
) -> list[str]:
    """``nats-server -t`` on ``text`` with each of ``variables`` set (to a placeholder) and
    ``files`` (paths relative to nats.conf: what it includes) beside it."""
    binary = find_tool("nats-server")
    env = {"PATH": os.environ.get("PATH", "")}
    env.update({name: f"check-{name.lower()}" for name in variables})
    with tempfile.TemporaryDirectory(prefix="loom-nats-check-") as folder:
        path = Path(folder) / "nats.conf"
        path.write_text(text, encoding="utf-8")
        for relative, content in (files or {}).items():
            extra = Path(folder) / relative
            extra.parent.mkdir(parents=True, exist_ok=True)
            extra.write_text(content, encoding="utf-8")
        code, output = run_tool([str(binary), "-t", "-c", str(path)], env=env)
    if code == 0:
        return []
    return [line.replace(str(path), "nats.conf") for line in output.splitlines() if line.strip()] or [
        f"nats-server -t exited with {code}"
    ]


_INCLUDE = re.compile(r"^\s*include\s+['\"]?([^'\"\s]+)", re.M)
_FORBIDDEN_AUTH = re.compile(r"^\s*(authorization|accounts|no_auth_user)\b", re.M)
_PRELOAD = re.compile(r"^\s*(A[A-Z2-7]{55})\s*:\s*\"([^\"]+)\"", re.M)


def secret_files(secret: Document | None) -> dict[str, str]:
    if secret is None:
        return {}
    files = {str(k): str(v) for k, v in (secret.get("stringData") or {}).items()}
    for key, value in (secret.get("data") or {}).items():
        files[str(key)] = base64.b64decode(str(value)).decode()
    return files


def stand_in_operator_config() -> str:
    """An operator configuration of the shape ``weft nats-auth init`` makes, for an overlay
    whose real one is created at install (prod): checked with fresh throw-away keys."""
    return server_auth_config(Issuer.generate(), "/data/jwt")


def included_files(
    text: str, mounts: dict[str, tuple[str, Document | None]], config_dir: str
) -> tuple[dict[str, str], list[str]]:
    """The files a nats.conf includes, from the Secrets mounted beside it (relative path ->
    text), and whether each came from a manifest or a stand-in."""
    files: dict[str, str] = {}
    problems: list[str] = []
    for include in _INCLUDE.findall(text):
        absolute = os.path.normpath(os.path.join(config_dir, include))
        for mount_path, (name, secret) in mounts.items():
            if absolute.startswith(mount_path.rstrip("/") + "/"):
                key = absolute[len(mount_path.rstrip("/")) + 1 :]
                content = secret_files(secret).get(key)
                if content is None and secret is None and key == "auth.conf":
                    content = stand_in_operator_config()
                if content is None:
                    problems.append(f"include {include}: Secret {name} has no key {key!r}")
                else:
                    files[include] = content
                break
        else:
            problems.append(f"include {include}: no Secret is mounted there")
    return files, problems


def operator_mode_problems(text: str, files: dict[str, str]) -> list[str]:
    """Who may do what is NATS's to enforce: no users or passwords in the config, operator mode
    with a resolver, and an account whose users get no permission they were not given."""
    problems = [
        f"{m.group(1)}: users and permissions come from JWTs (operator mode), not from nats.conf"
        for m in _FORBIDDEN_AUTH.finditer(text)
    ]
    operator = [content for content in files.values() if re.search(r"^\s*operator\s*:", content, re.M)]
    if not operator:
        return [*problems, "no operator configuration is included (weft nats-auth init makes one)"]
    conf = operator[0]
    if not re.search(r"^\s*resolver\s*:\s*\{[^}]*type\s*:\s*full", conf, re.M):
        problems.append("resolver: must be a full resolver (keeps pushed revocations, shares them)")
    try:
        operator_jwt = re.search(r'^\s*operator\s*:\s*"([^"]+)"', conf, re.M)
        operator_key = decode_jwt(operator_jwt.group(1) if operator_jwt else "")["sub"]
        accounts = {key: decode_jwt(jwt) for key, jwt in _PRELOAD.findall(conf)}
    except CredentialsError as exc:
        return [*problems, f"operator configuration: {exc.message}"]
    jetstream = [c for c in accounts.values() if (c.get("nats") or {}).get("limits", {}).get("disk_storage")]
    for key, claims in accounts.items():
        if claims.get("iss") != operator_key or claims.get("sub") != key:
            problems.append(f"account {key[:8]}...: not signed by the configured operator")
    if len(jetstream) != 1:
        problems.append("exactly one preloaded account (Loom's) must have JetStream")
    for claims in jetstream:
        defaults = (claims.get("nats") or {}).get("default_permissions") or {}
        if defaults != {"pub": {"deny": [">"]}, "sub": {"deny": [">"]}}:
            problems.append("Loom's account: a user without permissions of its own must get none")
    return problems


def nats_configs(doc: Document, index: Index) -> list[str]:
    """For a workload running nats-server: test every ConfigMap file it mounts, with the files
    it includes from mounted Secrets, and its authentication (operator mode, deny by default)."""
    spec = pod_spec(doc)
    if spec is None:
        return []
    ns = resource_id(doc).namespace
    problems: list[str] = []
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for container in containers(spec):
        if not split_image(str(container.get("image", "")))[0].endswith("nats"):
            continue
        variables = [str(env.get("name")) for env in container.get("env") or []]
        secrets: dict[str, tuple[str, Document | None]] = {}
        for mount in container.get("volumeMounts") or []:
            name = (volumes.get(mount.get("name")) or {}).get("secret", {}).get("secretName")
            if name:
                secrets[str(mount.get("mountPath"))] = (name, index.get("Secret", ns, name))
        for mount in container.get("volumeMounts") or []:
            cm_name = (volumes.get(mount.get("name")) or {}).get("configMap", {}).get("name")
            cm = index.get("ConfigMap", ns, cm_name) if cm_name else None
            for key, text in ((cm or {}).get("data") or {}).items():
                if key.endswith(".conf"):
                    files, missing = included_files(str(text), secrets, str(mount.get("mountPath")))
                    found = missing + nats_config_problems(str(text), variables, files)
                    found += operator_mode_problems(str(text), files)
                    problems += [f"ConfigMap {cm_name} {key}: {p}" for p in found]
    return problems


def boundary_policies(doc: Document) -> list[str]:
    """A ConfigMap file named boundary-policy.* must be a policy Weft can load."""
    if doc.get("kind") != "ConfigMap":
        return []
    problems: list[str] = []
    for key, text in (doc.get("data") or {}).items():
        if key.startswith("boundary-policy."):
            try:
                parse_policy(str(text), key)
            except PolicyError as exc:
                problems.append(str(exc))
    return problems


# -- entry points -------------------------------------------------------------------------


def check_documents(docs: list[Document], where: str) -> list[Finding]:
    index = Index(docs)
    findings: list[Finding] = []
    for doc in docs:
        rid: ResourceId = resource_id(doc)
        label = f"{rid.kind} {rid.namespace + '/' if rid.namespace else ''}{rid.name}"
        for version in versions():
            findings += [
                Finding("k8s-schema", where, f"{label} (Kubernetes {version}): {e}")
                for e in schema_errors(doc, version)
            ]
        findings += [Finding("k8s-security", where, f"{label}: {p}") for p in security(doc)]
        findings += [Finding("k8s-references", where, f"{label}: {p}") for p in references(doc, index)]
        findings += [Finding("nats-config", where, f"{label}: {p}") for p in nats_configs(doc, index)]
        findings += [Finding("boundary-policy", where, f"{label}: {p}") for p in boundary_policies(doc)]
    return findings


def check_overlay(folder: Path) -> list[Finding]:
    """Render one kustomization offline and check the result."""
    where = display(folder)
    try:
        docs = render(folder)
    except KustomizeError as exc:
        return [Finding("kustomize", where, str(exc))]
    return check_documents(docs, where)
