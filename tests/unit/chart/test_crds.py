"""The chart's CRDs are the generator's (``python -m kuota.webhook.crds``), upgradable and kept on uninstall."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from kuota.webhook.crds import crd_manifests
from tests.unit.chart.rendering import CHART, render

CRD_FILES = CHART / "files" / "crds"
REGENERATE = "regenerate with: python -m kuota.webhook.crds --out charts/kuota/files/crds"


def test_committed_crd_files_are_exactly_the_generator_output() -> None:
    expected = {f"{m['metadata']['name']}.yaml": yaml.safe_dump(m, sort_keys=False) for m in crd_manifests()}
    committed = {path.name: path.read_text() for path in CRD_FILES.glob("*.yaml")}
    assert sorted(committed) == sorted(expected), REGENERATE
    for name, text in expected.items():
        assert committed[name] == text, f"{name} differs from the generator; {REGENERATE}"


def _without_chart_metadata(crd: dict[str, Any]) -> dict[str, Any]:
    bare = copy.deepcopy(crd)
    metadata = bare["metadata"]
    metadata.pop("annotations", None)
    metadata["labels"] = {
        k: v for k, v in metadata["labels"].items() if k in ("app.kubernetes.io/name", "app.kubernetes.io/component")
    }
    return bare


def test_rendered_crds_are_the_generator_output_with_keep_and_release_labels() -> None:
    rendered = {crd["metadata"]["name"]: crd for crd in render().of_kind("CustomResourceDefinition")}
    expected = {m["metadata"]["name"]: m for m in crd_manifests()}
    assert sorted(rendered) == sorted(expected)
    for name, crd in rendered.items():
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}, name
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert _without_chart_metadata(crd) == expected[name], f"{name} changed on its way through the template"


def test_crds_keep_false_lets_uninstall_delete_them() -> None:
    for crd in render({"crds": {"keep": False}}).of_kind("CustomResourceDefinition"):
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})


def test_crds_install_false_renders_no_crd() -> None:
    assert render({"crds": {"install": False}}).of_kind("CustomResourceDefinition") == []


def test_the_conversion_service_reaches_the_manager_pods_before_they_are_ready() -> None:
    rendered = render()
    admission, conversion = (
        rendered.one("Service", "kuota-webhook"),
        rendered.one("Service", "kuota-webhook-conversion"),
    )
    assert conversion["spec"]["publishNotReadyAddresses"] is True
    assert "publishNotReadyAddresses" not in admission["spec"], "admission must wait for synced caches"
    assert (conversion["spec"]["selector"], conversion["spec"]["ports"]) == (
        admission["spec"]["selector"],
        admission["spec"]["ports"],
    )


def test_the_conversion_webhook_names_the_releases_service_and_no_ca_bundle() -> None:
    for crd in render({"fullnameOverride": "gpu-quota"}, namespace="platform").of_kind("CustomResourceDefinition"):
        assert crd["spec"]["conversion"] == {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {
                        "name": "gpu-quota-webhook-conversion",
                        "namespace": "platform",
                        "path": "/convert",
                        "port": 443,
                    }
                },
            },
        }, crd["metadata"]["name"]


def test_cert_manager_injects_the_ca_into_the_crds_conversion_webhook() -> None:
    rendered = render({"webhook": {"certificates": {"mode": "cert-manager"}}})
    certificate = rendered.one("Certificate")["metadata"]["name"]
    for crd in rendered.of_kind("CustomResourceDefinition"):
        assert crd["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"kuota-system/{certificate}",
            "helm.sh/resource-policy": "keep",
        }
