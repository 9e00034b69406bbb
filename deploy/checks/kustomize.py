"""A small offline renderer for the subset of kustomize that deploy/k8s uses.

No kustomize or kubectl installs from PyPI, so CI renders the overlays with
this instead. It supports ``resources`` (files and directories), ``labels``,
``images`` and JSON6902 ``patches`` with a ``target``, and refuses every other
field with an error rather than rendering something kustomize would not. It is
stricter than kustomize in one way: a patch whose target matches nothing is an
error (a silently ignored patch is a bug in an overlay).

deploy/k8s/rendered/<overlay>.yaml holds the output of the real kustomize
(``kubectl kustomize``) for each overlay; the tests check this renderer
produces the same documents, and, where a kustomize binary is installed,
that the committed files are still what kustomize renders.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deploy.checks.common import DEPLOY, display

Document = dict[str, Any]
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED = frozenset({"apiVersion", "kind", "resources", "labels", "images", "patches"})
OVERLAYS = DEPLOY / "k8s" / "overlays"
RENDERED = DEPLOY / "k8s" / "rendered"
_POD_SPEC_PATHS = (
    ("spec",),
    ("spec", "template", "spec"),
    ("spec", "jobTemplate", "spec", "template", "spec"),
)


class KustomizeError(ValueError):
    """The kustomization cannot be rendered; the message names the file and field."""


@dataclass(frozen=True)
class ResourceId:
    group: str
    version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}.{self.version}.{self.group or 'core'} {ns}{self.name}"


def resource_id(doc: Document) -> ResourceId:
    api = str(doc.get("apiVersion", ""))
    group, _, version = api.rpartition("/")
    meta = doc.get("metadata") or {}
    return ResourceId(
        group, version, str(doc.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))
    )


def _kustomization_file(folder: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    raise KustomizeError(f"{display(folder)}: no kustomization.yaml")


def _load(path: Path) -> list[Document]:
    try:
        with path.open(encoding="utf-8") as handle:
            docs = [d for d in yaml.safe_load_all(handle) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise KustomizeError(f"{display(path)}: cannot read YAML: {exc}") from None
    for doc in docs:
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            raise KustomizeError(f"{display(path)}: every document needs apiVersion and kind")
        if not (doc.get("metadata") or {}).get("name"):
            raise KustomizeError(f"{display(path)}: a {doc.get('kind')} has no metadata.name")
    return docs


def render(folder: Path, _seen: tuple[Path, ...] = ()) -> list[Document]:
    """Render the kustomization in ``folder`` into a list of documents."""
    folder = folder.resolve()
    if folder in _seen:
        raise KustomizeError(f"{display(folder)}: resources form a cycle")
    kfile = _kustomization_file(folder)
    spec = yaml.safe_load(kfile.read_text(encoding="utf-8")) or {}
    if not isinstance(spec, dict):
        raise KustomizeError(f"{display(kfile)}: must be a mapping")
    where = display(kfile)
    if spec.get("kind", "Kustomization") != "Kustomization":
        raise KustomizeError(f"{where}: kind must be Kustomization")
    unsupported = sorted(set(spec) - SUPPORTED)
    if unsupported:
        raise KustomizeError(
            f"{where}: field {unsupported[0]!r} is not supported by the offline renderer "
            f"(supported: {', '.join(sorted(SUPPORTED))})"
        )
    docs: list[Document] = []
    seen_ids: dict[ResourceId, str] = {}
    for entry in spec.get("resources") or []:
        target = (folder / str(entry)).resolve()
        if target.is_dir():
            loaded = render(target, (*_seen, folder))
        elif target.is_file():
            loaded = _load(target)
        else:
            raise KustomizeError(f"{where}: resources: {entry!r} does not exist")
        for doc in loaded:
            rid = resource_id(doc)
            if rid in seen_ids:
                raise KustomizeError(f"{where}: {rid} is defined twice ({seen_ids[rid]} and {entry})")
            seen_ids[rid] = str(entry)
            docs.append(doc)
    for index, patch in enumerate(spec.get("patches") or []):
        _apply_patch(docs, patch, folder, f"{where}: patches[{index}]")
    for index, label in enumerate(spec.get("labels") or []):
        _apply_labels(docs, label, f"{where}: labels[{index}]")
    for index, image in enumerate(spec.get("images") or []):
        _apply_image(docs, image, f"{where}: images[{index}]")
    return docs


# -- patches --------------------------------------------------------------------------


def _matches(doc: Document, target: dict[str, Any]) -> bool:
    rid = resource_id(doc)
    wanted = {
        "kind": rid.kind,
        "name": rid.name,
        "namespace": rid.namespace,
        "group": rid.group,
        "version": rid.version,
    }
    return all(target[key] == value for key, value in wanted.items() if key in target)


def _apply_patch(docs: list[Document], patch: Any, folder: Path, where: str) -> None:
    if not isinstance(patch, dict):
        raise KustomizeError(f"{where}: must be a mapping with target and patch (or path)")
    unknown = set(patch) - {"target", "patch", "path"}
    if unknown:
        raise KustomizeError(
            f"{where}: field {sorted(unknown)[0]!r} is not supported by the offline renderer"
        )
    target = patch.get("target")
    if not isinstance(target, dict) or not target:
        raise KustomizeError(f"{where}: target is required (kind, name, ...)")
    bad_keys = set(target) - {"kind", "name", "namespace", "group", "version"}
    if bad_keys:
        raise KustomizeError(
            f"{where}: target.{sorted(bad_keys)[0]} is not supported by the offline renderer"
        )
    if ("patch" in patch) == ("path" in patch):
        raise KustomizeError(f"{where}: give exactly one of patch and path")
    text = (
        str(patch["patch"]) if "patch" in patch else (folder / str(patch["path"])).read_text(encoding="utf-8")
    )
    try:
        operations = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KustomizeError(f"{where}: patch is not valid YAML: {exc}") from None
    if not isinstance(operations, list):
        raise KustomizeError(
            f"{where}: only JSON6902 patches (a list of operations) are supported by the offline renderer"
        )
    matched = [doc for doc in docs if _matches(doc, target)]
    if not matched:
        raise KustomizeError(f"{where}: target {target} matches no resource")
    for doc in matched:
        for number, operation in enumerate(operations):
            apply_operation(doc, operation, f"{where}: operation {number}")


def _pointer(path: Any, where: str) -> list[str]:
    if not isinstance(path, str) or not path.startswith("/"):
        raise KustomizeError(f"{where}: path must be a JSON pointer starting with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, where: str, *, insert: bool) -> int:
    if insert and token == "-":
        return len(container)
    if not re.fullmatch(r"0|[1-9][0-9]*", token):
        raise KustomizeError(f"{where}: {token!r} is not a list index")
    index = int(token)
    limit = len(container) if insert else len(container) - 1
    if index > limit:
        raise KustomizeError(f"{where}: index {index} is out of range")
    return index


def apply_operation(doc: Document, operation: Any, where: str) -> None:
    """One RFC 6902 operation (add, remove, replace, test) applied in place."""
    if not isinstance(operation, dict) or "op" not in operation:
        raise KustomizeError(f"{where}: must be a mapping with op and path")
    op = operation["op"]
    tokens = _pointer(operation.get("path"), where)
    parent: Any = doc
    for token in tokens[:-1]:
        if isinstance(parent, dict) and token in parent:
            parent = parent[token]
        elif isinstance(parent, list):
            parent = parent[_index(parent, token, where, insert=False)]
        else:
            raise KustomizeError(f"{where}: path {operation['path']} does not exist")
    last = tokens[-1]
    value = copy.deepcopy(operation.get("value"))
    if op in ("add", "replace", "test") and "value" not in operation:
        raise KustomizeError(f"{where}: {op} needs a value")
    if isinstance(parent, dict):
        exists = last in parent
        if op == "add":
            parent[last] = value
        elif not exists:
            raise KustomizeError(f"{where}: path {operation['path']} does not exist")
        elif op == "replace":
            parent[last] = value
        elif op == "remove":
            del parent[last]
        elif op == "test":
            if parent[last] != value:
                raise KustomizeError(f"{where}: test failed at {operation['path']}")
        else:
            raise KustomizeError(f"{where}: op {op!r} is not supported (add, remove, replace, test)")
    elif isinstance(parent, list):
        if op == "add":
            parent.insert(_index(parent, last, where, insert=True), value)
            return
        index = _index(parent, last, where, insert=False)
        if op == "replace":
            parent[index] = value
        elif op == "remove":
            del parent[index]
        elif op == "test":
            if parent[index] != value:
                raise KustomizeError(f"{where}: test failed at {operation['path']}")
        else:
            raise KustomizeError(f"{where}: op {op!r} is not supported (add, remove, replace, test)")
    else:
        raise KustomizeError(f"{where}: path {operation['path']} does not exist")


# -- labels and images ----------------------------------------------------------------


def _pod_specs(doc: Document) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = []
    for path in _POD_SPEC_PATHS:
        node: Any = doc
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get("containers"), list):
            specs.append(node)
    return specs


def _apply_labels(docs: list[Document], label: Any, where: str) -> None:
    if not isinstance(label, dict) or not isinstance(label.get("pairs"), dict):
        raise KustomizeError(f"{where}: needs pairs")
    unknown = set(label) - {"pairs", "includeSelectors", "includeTemplates"}
    if unknown:
        raise KustomizeError(
            f"{where}: field {sorted(unknown)[0]!r} is not supported by the offline renderer"
        )
    if label.get("includeSelectors") or label.get("includeTemplates"):
        raise KustomizeError(
            f"{where}: includeSelectors/includeTemplates are not supported by the offline renderer"
        )
    pairs = {str(k): str(v) for k, v in label["pairs"].items()}
    for doc in docs:
        doc.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of an image reference; a registry port is not a tag."""
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def _apply_image(docs: list[Document], rule: Any, where: str) -> None:
    if not isinstance(rule, dict) or not rule.get("name"):
        raise KustomizeError(f"{where}: needs name")
    unknown = set(rule) - {"name", "newName", "newTag", "digest"}
    if unknown:
        raise KustomizeError(
            f"{where}: field {sorted(unknown)[0]!r} is not supported by the offline renderer"
        )
    for doc in docs:
        for spec in _pod_specs(doc):
            for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
                name, tag, digest = split_image(str(container.get("image", "")))
                if name != rule["name"]:
                    continue
                new = str(rule.get("newName", name))
                if rule.get("digest"):
                    container["image"] = f"{new}@{rule['digest']}"
                elif "newTag" in rule:
                    container["image"] = f"{new}:{rule['newTag']}"
                else:
                    suffix = f":{tag}" if tag else ""
                    container["image"] = f"{new}{suffix}" + (f"@{digest}" if digest else "")


# -- comparison with the real kustomize -----------------------------------------------


def keyed(docs: list[Document]) -> dict[ResourceId, Document]:
    return {resource_id(doc): doc for doc in docs}


def differences(ours: list[Document], theirs: list[Document]) -> list[str]:
    """Human-readable differences between two renderings (order does not matter)."""
    a, b = keyed(ours), keyed(theirs)
    found = [f"only in the offline rendering: {rid}" for rid in a.keys() - b.keys()]
    found += [f"only in kustomize's rendering: {rid}" for rid in b.keys() - a.keys()]
    found += [f"{rid} differs" for rid in a.keys() & b.keys() if a[rid] != b[rid]]
    return sorted(found)


def kustomize_binary() -> list[str] | None:
    """A real kustomize if this machine has one (kustomize, or kubectl's built-in)."""
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


def render_with_kustomize(folder: Path, command: list[str]) -> list[Document]:
    done = subprocess.run([*command, str(folder)], capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise KustomizeError(f"{display(folder)}: {' '.join(command)} failed: {done.stderr.strip()}")
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


def load_rendered(overlay: str) -> list[Document]:
    path = RENDERED / f"{overlay}.yaml"
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def write_rendered(overlay: str, command: list[str]) -> Path:
    """Regenerate deploy/k8s/rendered/<overlay>.yaml with the real kustomize."""
    done = subprocess.run(
        [*command, str(OVERLAYS / overlay)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise KustomizeError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    header = (
        f"# Rendered by `{' '.join(command)} deploy/k8s/overlays/{overlay}`; do not edit.\n"
        "# Regenerate: python -m deploy.checks.kustomize --write-rendered\n"
    )
    path = RENDERED / f"{overlay}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + done.stdout, encoding="utf-8")
    return path


def overlays() -> list[str]:
    return sorted(p.name for p in OVERLAYS.iterdir() if p.is_dir())


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m deploy.checks.kustomize")
    parser.add_argument(
        "--write-rendered", action="store_true", help="regenerate deploy/k8s/rendered with kustomize"
    )
    parser.add_argument("overlay", nargs="?", help="print one overlay rendered offline")
    args = parser.parse_args(argv)
    if args.write_rendered:
        command = kustomize_binary()
        if command is None:
            print("no kustomize or kubectl on PATH; the rendered files must come from the real kustomize")
            return 1
        for name in overlays():
            print(display(write_rendered(name, command)))
        return 0
    for name in [args.overlay] if args.overlay else overlays():
        print(yaml.safe_dump_all(render(OVERLAYS / name), sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
