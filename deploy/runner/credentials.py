"""NATS credentials for agents that Weft starts as Kubernetes Jobs.

Weft refuses to put credentials into a Job manifest (anyone who may read Jobs
would see them), so the Job gets a credential-free NATS_URL and the name of a
Secret in LOOM_NATS_SECRET_NAME. The runner reads that one Secret with the pod's
service-account token (the loom-agent ServiceAccount may ``get`` exactly it)
and hands the values to Warp only.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from pathlib import Path

import httpx

from deploy.runner.config import ConfigError
from shared.redact import register_secret

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Keys of the Secret that are used; anything else in it is ignored.
NATS_KEYS = ("NATS_URL", "NATS_USER", "NATS_PASS", "NATS_TOKEN")
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
TIMEOUT_S = 10.0


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"LOOM_NATS_SECRET_NAME: cannot read the service-account {what} ({path}): {exc.strerror}; "
            "is the pod's service-account token mounted?"
        ) from None


def api_url(env: Mapping[str, str]) -> str:
    explicit = env.get("LOOM_K8S_API_URL", "").strip()
    if explicit:
        return explicit.rstrip("/")
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError(
            "LOOM_NATS_SECRET_NAME: not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset)"
        )
    host = f"[{host}]" if ":" in host else host
    return f"https://{host}:{port}"


def nats_credentials(env: Mapping[str, str]) -> dict[str, str]:
    """The NATS_* values of the Secret named by LOOM_NATS_SECRET_NAME (nothing when it is unset)."""
    name = env.get("LOOM_NATS_SECRET_NAME", "").strip()
    if not name:
        return {}
    if not _K8S_NAME.fullmatch(name):
        raise ConfigError(
            "LOOM_NATS_SECRET_NAME: must be a Kubernetes Secret name (lowercase, digits, '-', '.')"
        )
    folder = Path(env.get("LOOM_K8S_SA_DIR", "").strip() or SERVICE_ACCOUNT_DIR)
    token = _read(folder / "token", "token")
    namespace = _read(folder / "namespace", "namespace")
    register_secret(token)
    ca = folder / "ca.crt"
    url = f"{api_url(env)}/api/v1/namespaces/{namespace}/secrets/{name}"
    try:
        response = httpx.get(
            url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            verify=str(ca) if ca.is_file() else True,
            timeout=TIMEOUT_S,
        )
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"LOOM_NATS_SECRET_NAME: cannot reach the Kubernetes API: {type(exc).__name__}"
        ) from None
    if response.status_code != 200:
        raise ConfigError(
            f"LOOM_NATS_SECRET_NAME: the Kubernetes API refused to read Secret {namespace}/{name} "
            f"({response.status_code}); the pod's ServiceAccount needs `get` on it"
        )
    try:
        data = response.json().get("data") or {}
        values = {key: base64.b64decode(data[key]).decode() for key in NATS_KEYS if key in data}
    except (ValueError, AttributeError, UnicodeDecodeError):
        raise ConfigError(
            f"LOOM_NATS_SECRET_NAME: Secret {namespace}/{name} is not a readable Secret"
        ) from None
    if not values:
        raise ConfigError(
            f"LOOM_NATS_SECRET_NAME: Secret {namespace}/{name} has none of the keys {', '.join(NATS_KEYS)}"
        )
    for key in ("NATS_PASS", "NATS_TOKEN", "NATS_URL"):
        register_secret(values.get(key))
    return values


def environment_with_credentials(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the Secret's NATS values laid over it (when LOOM_NATS_SECRET_NAME is set)."""
    merged = dict(env)
    merged.update(nats_credentials(env))
    return merged
