"""The offline kustomize renderer: the features deploy/k8s uses, and clear errors for the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.checks.kustomize import (
    KustomizeError,
    apply_operation,
    differences,
    kustomize_binary,
    render,
    render_with_kustomize,
    split_image,
)

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "app", "namespace": "ns", "annotations": {"a": "1"}},
    "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {
                "initContainers": [{"name": "init", "image": "registry.local:5000/tools/init:1.0"}],
                "containers": [
                    {"name": "app", "image": "loom/weft:0.1.0"},
                    {"name": "side", "image": "nats"},
                ],
            },
        },
    },
}


def write(folder: Path, kustomization: dict[str, Any], files: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    for name, docs in (files or {}).items():
        (folder / name).write_text(yaml.safe_dump_all(docs if isinstance(docs, list) else [docs]))
    return folder


def kustomization(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", **fields}


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    write(tmp_path / "base", kustomization(resources=["app.yaml"]), {"app.yaml": DEPLOYMENT})
    return write(
        tmp_path / "overlay",
        kustomization(
            resources=["../base"],
            labels=[{"pairs": {"team": "loom"}, "includeSelectors": False}],
            images=[
                {"name": "loom/weft", "newName": "registry.example.com/loom/weft", "newTag": "2.0.0"},
                {"name": "registry.local:5000/tools/init", "digest": "sha256:" + "a" * 64},
                {"name": "nats", "newTag": "2.15.1"},
            ],
            patches=[
                {
                    "target": {"kind": "Deployment", "name": "app"},
                    "patch": yaml.safe_dump(
                        [
                            {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "ops"},
                            {
                                "op": "add",
                                "path": "/spec/template/spec/containers/-",
                                "value": {"name": "z", "image": "busybox:1.36"},
                            },
                            {
                                "op": "replace",
                                "path": "/spec/template/spec/containers/0/name",
                                "value": "weft",
                            },
                            {"op": "remove", "path": "/metadata/annotations/a"},
                            {"op": "test", "path": "/metadata/name", "value": "app"},
                            {"op": "add", "path": "/spec/replicas", "value": 2},
                        ]
                    ),
                }
            ],
        ),
    )


def test_renders_resources_patches_labels_and_images(sample: Path) -> None:
    (doc,) = render(sample)
    assert doc["metadata"]["labels"] == {"team": "loom"}
    assert doc["spec"]["template"]["metadata"]["labels"] == {"app": "x"}  # includeSelectors: false
    assert doc["metadata"]["annotations"] == {"example.com/owner": "ops"}
    assert doc["spec"]["replicas"] == 2
    spec = doc["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["weft", "side", "z"]
    assert spec["containers"][0]["image"] == "registry.example.com/loom/weft:2.0.0"
    assert spec["containers"][1]["image"] == "nats:2.15.1"
    assert spec["initContainers"][0]["image"] == "registry.local:5000/tools/init@sha256:" + "a" * 64


def test_agrees_with_the_real_kustomize_where_installed(sample: Path) -> None:
    """Cross-check on the features above (runs kustomize only where it is installed)."""
    ours = render(sample)
    assert ours and ours[0]["kind"] == "Deployment"
    command = kustomize_binary()
    if command is not None:
        assert differences(ours, render_with_kustomize(sample, command)) == []


def test_split_image_keeps_a_registry_port_in_the_name() -> None:
    assert split_image("registry.local:5000/a/b:1.2") == ("registry.local:5000/a/b", "1.2", None)
    assert split_image("nats") == ("nats", None, None)
    assert split_image("x/y@sha256:00") == ("x/y", None, "sha256:00")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"namespace": "other"}, "field 'namespace' is not supported"),
        ({"configMapGenerator": []}, "field 'configMapGenerator' is not supported"),
        ({"resources": ["missing.yaml"]}, "does not exist"),
        ({"resources": ["app.yaml", "app.yaml"]}, "defined twice"),
        (
            {"resources": ["app.yaml"], "patches": [{"target": {"kind": "Service"}, "patch": "[]"}]},
            "matches no resource",
        ),
        (
            {
                "resources": ["app.yaml"],
                "patches": [{"target": {"kind": "Deployment"}, "patch": "spec: {replicas: 2}"}],
            },
            "only JSON6902 patches",
        ),
        ({"resources": ["app.yaml"], "patches": [{"patch": "[]"}]}, "target is required"),
        (
            {"resources": ["app.yaml"], "labels": [{"pairs": {"a": "b"}, "includeSelectors": True}]},
            "includeSelectors",
        ),
        (
            {"resources": ["app.yaml"], "images": [{"name": "x", "newImage": "y"}]},
            "'newImage' is not supported",
        ),
        ({"kind": "Component"}, "kind must be Kustomization"),
    ],
)
def test_unsupported_or_wrong_kustomizations_are_errors(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    folder = write(tmp_path, kustomization(**fields), {"app.yaml": DEPLOYMENT})
    with pytest.raises(KustomizeError, match=message):
        render(folder)


def test_a_resource_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "a", kustomization(resources=["../b"]))
    write(tmp_path / "b", kustomization(resources=["../a"]))
    with pytest.raises(KustomizeError, match="cycle"):
        render(tmp_path / "a")


def test_a_folder_without_kustomization_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KustomizeError, match=r"no kustomization\.yaml"):
        render(tmp_path)


def test_a_document_without_a_name_is_an_error(tmp_path: Path) -> None:
    folder = write(
        tmp_path, kustomization(resources=["x.yaml"]), {"x.yaml": {"apiVersion": "v1", "kind": "Service"}}
    )
    with pytest.raises(KustomizeError, match=r"no metadata\.name"):
        render(folder)


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"op": "replace", "path": "/spec/missing", "value": 1}, "does not exist"),
        ({"op": "remove", "path": "/spec/list/5"}, "out of range"),
        ({"op": "add", "path": "/spec/list/x", "value": 1}, "not a list index"),
        ({"op": "test", "path": "/spec/list/0", "value": 9}, "test failed"),
        ({"op": "move", "path": "/spec/list/0", "from": "/x"}, "not supported"),
        ({"op": "add", "path": "spec"}, "JSON pointer"),
        ({"op": "add", "path": "/spec/new"}, "needs a value"),
        ({"op": "add", "path": "/nowhere/deeper", "value": 1}, "does not exist"),
    ],
)
def test_bad_patch_operations_are_errors(operation: dict[str, Any], message: str) -> None:
    doc = {"spec": {"list": [1, 2]}}
    with pytest.raises(KustomizeError, match=message):
        apply_operation(doc, operation, "here")


def test_list_operations() -> None:
    doc: dict[str, Any] = {"spec": {"list": [1, 2]}}
    apply_operation(doc, {"op": "add", "path": "/spec/list/0", "value": 0}, "x")
    apply_operation(doc, {"op": "add", "path": "/spec/list/-", "value": 3}, "x")
    apply_operation(doc, {"op": "remove", "path": "/spec/list/1"}, "x")
    apply_operation(doc, {"op": "replace", "path": "/spec/list/0", "value": "zero"}, "x")
    assert doc["spec"]["list"] == ["zero", 2, 3]


def test_differences_name_what_differs() -> None:
    a = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}, "spec": {}}
    b = {**a, "spec": {"type": "ClusterIP"}}
    c = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert differences([a], [a]) == []
    assert differences([a], [b]) == ["Service.v1.core n/s differs"]
    assert differences([a, c], [a]) == ["only in the offline rendering: ConfigMap.v1.core c"]
