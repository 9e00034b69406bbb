"""``kubernetes``: run the agent as a batch/v1 Job, through the API server over HTTPS.

Credentials: in-cluster (the pod's service-account token, CA and namespace
under ``/var/run/secrets/kubernetes.io/serviceaccount``) or explicit
``api_url`` with ``token_env``/``token_file`` and ``ca_file``. The Job carries
labels naming the target, project, agent and spin-up; stopping deletes it with
``propagationPolicy: Background`` so its pods go too.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import Field, field_validator, model_validator

from shared.errors import shown_name
from shared.nats.auth import CREDS_CONTENT
from shared.redact import register_secret
from shared.tls import client_tls
from weft.spinup.config import (
    K8S_NAME,
    MechanismConfig,
    argv,
    http_url,
    secret_env_name,
)
from weft.spinup.mechanisms.base import (
    HandleCallback,
    Launch,
    Mechanism,
    MechanismError,
    ProbeResult,
    Stopwatch,
    secret_from_env,
    url_has_credentials,
)


class KubernetesConfig(MechanismConfig):
    image: str = Field(min_length=1, max_length=512)
    command: list[str] | None = None
    args: list[str] | None = None
    namespace: str | None = None
    """Default: the service account's namespace in-cluster, else ``default``."""
    api_url: str | None = None
    """Default: in-cluster (``KUBERNETES_SERVICE_HOST``) with the service-account token and CA."""
    token_env: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    service_account: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    resources: dict[str, dict[str, str]] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    backoff_limit: int = Field(default=0, ge=0, le=10)
    ttl_seconds_after_finished: int | None = Field(default=600, ge=0)
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    job_name_prefix: str = Field(default="loom-agent", max_length=40)
    timeout_s: float = Field(default=15.0, gt=0, le=300)

    @field_validator("command", "args", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> list[str] | None:
        return None if v is None else argv(v)

    @field_validator("namespace", "service_account")
    @classmethod
    def _k8s_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 63 or K8S_NAME.fullmatch(v) is None):
            raise ValueError("must be a Kubernetes name (lowercase letters, digits, '-', at most 63)")
        return v

    @field_validator("job_name_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if K8S_NAME.fullmatch(v) is None:
            raise ValueError("must be lowercase letters, digits and '-'")
        return v

    @field_validator("api_url")
    @classmethod
    def _api(cls, v: str | None) -> str | None:
        return http_url(v)

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, v: str | None) -> str | None:
        return secret_env_name(v)

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", key):
                raise ValueError(f"key {shown_name(key)} is not a valid label key")
            if key.startswith("loom.dev/"):
                raise ValueError("the loom.dev/ labels are set by Weft")
            if not re.fullmatch(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", value):
                raise ValueError(f"the value of label {shown_name(key)} is not a valid label value")
        return v

    @model_validator(mode="after")
    def _credentials(self) -> KubernetesConfig:
        if self.token_env and self.token_file:
            raise ValueError("token_env: give token_env or token_file, not both")
        return self


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
MANAGED_BY = "loom-weft"


def label_value(text: str) -> str:
    """Squeeze ``text`` into a valid label value (63 chars, alphanumeric at both ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:63]
    return cleaned.strip("-_.")


@dataclass
class ApiAccess:
    base_url: str
    namespace: str
    headers: dict[str, str]
    verify: ssl.SSLContext | bool


def job_name(config: KubernetesConfig, spinup_id: str) -> str:
    return f"{config.job_name_prefix}-{spinup_id[:16]}"


def job_labels(config: KubernetesConfig, launch: Launch) -> dict[str, str]:
    labels = dict(config.labels)
    labels.update(
        {
            "app.kubernetes.io/managed-by": MANAGED_BY,
            "loom.dev/project": label_value(launch.project_id),
            "loom.dev/target": label_value(launch.target_name),
            "loom.dev/target-id": launch.target_id,
            "loom.dev/agent-id": launch.agent_id,
            "loom.dev/spinup-id": launch.spinup_id,
        }
    )
    return labels


CREDS_KEY = "nats.creds"


def creds_secret_name(config: KubernetesConfig, spinup_id: str) -> str:
    return f"{job_name(config, spinup_id)}-nats"


def creds_secret(config: KubernetesConfig, launch: Launch, namespace: str) -> dict[str, Any]:
    """The Secret holding one agent's NATS credentials (deleted with its Job; revoked anyway)."""
    assert launch.nats_creds is not None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": creds_secret_name(config, launch.spinup_id),
            "namespace": namespace,
            "labels": job_labels(config, launch),
        },
        "stringData": {CREDS_KEY: launch.nats_creds},
    }


def job_manifest(config: KubernetesConfig, launch: Launch, namespace: str) -> dict[str, Any]:
    """The Job that runs one agent."""
    labels = job_labels(config, launch)
    env: list[dict[str, Any]] = [
        {"name": name, "value": value}
        for name, value in sorted(launch.env().items())
        if name != CREDS_CONTENT
    ]
    if launch.nats_creds is not None:  # from the operation's own Secret: a Job is readable by many
        ref = {"name": creds_secret_name(config, launch.spinup_id), "key": CREDS_KEY}
        env.append({"name": CREDS_CONTENT, "valueFrom": {"secretKeyRef": ref}})
    container: dict[str, Any] = {"name": "agent", "image": config.image, "env": env}
    if config.command:
        container["command"] = list(config.command)
    if config.args:
        container["args"] = list(config.args)
    if config.image_pull_policy:
        container["imagePullPolicy"] = config.image_pull_policy
    if config.resources:
        container["resources"] = config.resources
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if config.service_account:
        pod_spec["serviceAccountName"] = config.service_account
    spec: dict[str, Any] = {
        "backoffLimit": config.backoff_limit,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }
    if config.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = config.ttl_seconds_after_finished
    if config.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = config.active_deadline_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(config, launch.spinup_id), "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _status_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or "")[:300]
    return ""


class KubernetesMechanism(Mechanism):
    name = "kubernetes"
    config_model = KubernetesConfig

    def __init__(self, service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> None:
        self._sa_dir = service_account_dir

    def access(self, config: KubernetesConfig) -> ApiAccess:
        """Where the API server is and how to authenticate, from config or in-cluster files."""
        in_cluster = config.api_url is None
        if in_cluster:
            host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
            if not host:
                raise MechanismError(
                    "config.api_url: not running in a cluster (KUBERNETES_SERVICE_HOST unset); give api_url"
                )
            host = f"[{host}]" if ":" in host else host
            base_url = f"https://{host}:{port or '443'}"
        else:
            assert config.api_url is not None
            base_url = config.api_url
        token: str | None = None
        if config.token_env:
            token = secret_from_env(config.token_env, "token_env")
        else:
            token_file = Path(config.token_file) if config.token_file else None
            if token_file is None and in_cluster:
                token_file = self._sa_dir / "token"
            if token_file is not None:
                try:
                    token = token_file.read_text().strip()
                except OSError as exc:
                    raise MechanismError(
                        f"config.token_file: cannot read {token_file}: {exc.strerror}"
                    ) from None
                register_secret(token)
        namespace = config.namespace
        if namespace is None:
            try:
                namespace = (self._sa_dir / "namespace").read_text().strip() or "default"
            except OSError:
                namespace = "default"
        verify: ssl.SSLContext | bool = client_tls(base_url)
        if config.insecure_skip_tls_verify:
            verify = False
        else:
            ca = config.ca_file or (str(self._sa_dir / "ca.crt") if in_cluster else None)
            if ca is not None:
                try:
                    verify = ssl.create_default_context(cafile=ca)
                except (OSError, ssl.SSLError) as exc:
                    raise MechanismError(f"config.ca_file: cannot load {ca}: {exc}") from None
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if urlsplit(base_url).scheme == "http" and token:
            raise MechanismError("config.api_url: refusing to send a token over plain http://")
        return ApiAccess(base_url=base_url, namespace=namespace, headers=headers, verify=verify)

    async def _request(
        self,
        config: KubernetesConfig,
        method: str,
        path: str,
        *,
        json: Any = None,
        timeout: float | None = None,
    ) -> tuple[ApiAccess, httpx.Response]:
        access = self.access(config)
        try:
            async with httpx.AsyncClient(
                base_url=access.base_url,
                headers=access.headers,
                verify=access.verify,
                timeout=timeout or config.timeout_s,
            ) as client:
                response = await client.request(method, path.format(ns=access.namespace), json=json)
        except httpx.HTTPError as exc:
            raise MechanismError(f"Kubernetes API {access.base_url}: {type(exc).__name__}: {exc}") from None
        return access, response

    async def start(self, config: Any, launch: Launch, on_handle: HandleCallback) -> dict[str, str]:
        assert isinstance(config, KubernetesConfig)
        if url_has_credentials(launch.nats_url):
            raise MechanismError(
                "the agent NATS URL carries credentials, which a Job manifest would expose; give this "
                "target a credential-free config.nats_url and the agents their credentials another way"
            )
        access = self.access(config)
        manifest = job_manifest(config, launch, access.namespace)
        if launch.nats_creds is not None:
            secret = creds_secret(config, launch, access.namespace)
            _, created = await self._request(config, "POST", "/api/v1/namespaces/{ns}/secrets", json=secret)
            if created.status_code not in (200, 201, 202):
                raise MechanismError(
                    f"Kubernetes refused the agent's credentials Secret ({created.status_code}): "
                    f"{_status_message(created)}"
                )
        _, response = await self._request(
            config, "POST", "/apis/batch/v1/namespaces/{ns}/jobs", json=manifest
        )
        if response.status_code not in (200, 201, 202):
            raise MechanismError(
                f"Kubernetes refused the Job ({response.status_code}): {_status_message(response)}"
            )
        metadata = response.json().get("metadata", {}) if response.content else {}
        handle = {
            "job": manifest["metadata"]["name"],
            "namespace": access.namespace,
            "uid": str(metadata.get("uid", "")),
        }
        if launch.nats_creds is not None:
            handle["secret"] = creds_secret_name(config, launch.spinup_id)
        await on_handle(handle)
        return handle

    async def stop(self, config: Any, handle: dict[str, str]) -> str:
        assert isinstance(config, KubernetesConfig)
        name, namespace = handle["job"], handle["namespace"]
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        _, response = await self._request(
            config, "DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", json=body
        )
        if handle.get("secret"):
            with contextlib.suppress(MechanismError):  # revoked already; a leftover is harmless
                await self._request(
                    config, "DELETE", f"/api/v1/namespaces/{namespace}/secrets/{handle['secret']}"
                )
        if response.status_code == 404:
            return f"Job {namespace}/{name} was already gone"
        if response.status_code not in (200, 202):
            raise MechanismError(
                f"Kubernetes refused to delete Job {namespace}/{name} ({response.status_code}): "
                f"{_status_message(response)}"
            )
        return f"Job {namespace}/{name} deleted"

    async def alive(self, config: Any, handle: dict[str, str]) -> bool | None:
        assert isinstance(config, KubernetesConfig)
        try:
            _, response = await self._request(
                config, "GET", f"/apis/batch/v1/namespaces/{handle['namespace']}/jobs/{handle['job']}"
            )
        except MechanismError:
            return None
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            return None
        status = response.json().get("status", {})
        return not (status.get("failed") or status.get("succeeded"))

    async def probe(self, config: Any, timeout_s: float) -> ProbeResult:
        assert isinstance(config, KubernetesConfig)
        watch = Stopwatch()
        try:
            access, listing = await self._request(
                config, "GET", "/apis/batch/v1/namespaces/{ns}/jobs?limit=1", timeout=timeout_s
            )
            if listing.status_code != 200:
                return ProbeResult(
                    False,
                    f"cannot list Jobs in namespace {access.namespace} ({listing.status_code}): "
                    f"{_status_message(listing)}",
                    watch.ms,
                )
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {
                    "resourceAttributes": {
                        "namespace": access.namespace,
                        "verb": "create",
                        "group": "batch",
                        "resource": "jobs",
                    }
                },
            }
            _, answer = await self._request(
                config,
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                json=review,
                timeout=timeout_s,
            )
        except MechanismError as exc:
            return ProbeResult(False, str(exc), watch.ms)
        if answer.status_code not in (200, 201) or not answer.json().get("status", {}).get("allowed"):
            return ProbeResult(False, f"not allowed to create Jobs in namespace {access.namespace}", watch.ms)
        return ProbeResult(True, f"namespace {access.namespace}: Jobs can be listed and created", watch.ms)
