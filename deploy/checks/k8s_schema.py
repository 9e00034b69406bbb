"""Kubernetes schema validation, offline, with the JSON schemas that the
``kubernetes-validate`` wheel bundles (strict: unknown fields are errors).

kubernetes-validate's own ``validate`` stops at the first error and only warns
about kinds it has no schema for; this reports every error and treats an
unknown kind as an error, because a typo in ``kind`` must not pass.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from kubernetes_validate import utils as kv_utils  # type: ignore[import-untyped]
from referencing import Registry, Resource

# The oldest Kubernetes minor the manifests promise to work with, and the newest bundled.
MIN_VERSION = "1.29"


def versions() -> list[str]:
    """Kubernetes versions to validate against: the oldest supported and the newest bundled."""
    newest = kv_utils.latest_version()
    return [MIN_VERSION] if newest == MIN_VERSION else [MIN_VERSION, ".".join(newest.split(".")[:2])]


def _bundled(version: str) -> str:
    for candidate in sorted(
        kv_utils.all_versions(), key=lambda v: tuple(int(x) for x in v.split(".")), reverse=True
    ):
        if tuple(int(x) for x in candidate.split(".")[:2]) <= tuple(int(x) for x in version.split(".")[:2]):
            return str(candidate)
    raise ValueError(f"kubernetes-validate bundles no schema for Kubernetes {version}")


@cache
def _validator(schema_dir: str, kind: str, api: str, version: str) -> Any:
    try:
        schema = kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind}-{api}.json", version)
    except FileNotFoundError:
        return None
    definitions = kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", version)
    registry: Registry[Any] = Resource.from_contents(definitions) @ (
        Resource.from_contents(schema) @ Registry()
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def schema_errors(doc: dict[str, Any], version: str) -> list[str]:
    """Every schema error of one document against Kubernetes ``version`` (strict)."""
    api_version = str(doc.get("apiVersion", ""))
    kind = str(doc.get("kind", ""))
    if not api_version or not kind:
        return ["apiVersion and kind are required"]
    bundled = _bundled(version)
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    validator = _validator(f"v{bundled}-local-strict", kind.lower(), api, bundled)
    if validator is None:
        return [
            f"no Kubernetes {version} schema for kind {kind} in {api_version} "
            "(a typo, or not a built-in kind)"
        ]
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}" for e in errors]
