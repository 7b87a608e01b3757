"""Every CRD serves v1beta1 beside the stored v1beta2 through the webhook, and each version's schema holds every
field the conversion writes in it (the API server prunes what a schema lacks)."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.webhook.crds import crd_manifests
from kuota.webhook.crds.definitions import DEFINITIONS
from tests.unit.webhook.conversion.test_kinds import PAIRS

MANIFESTS = {manifest["spec"]["names"]["kind"]: manifest for manifest in crd_manifests()}


def _schema(kind: str, version: str) -> dict[str, Any]:
    versions = {entry["name"]: entry for entry in MANIFESTS[kind]["spec"]["versions"]}
    schema: dict[str, Any] = versions[version]["schema"]["openAPIV3Schema"]
    return schema


def _unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Paths in ``value`` the schema would prune."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or path == ".metadata":
        return []
    if isinstance(value, list):
        return [
            f for index, item in enumerate(value) for f in _unknown_fields(item, schema["items"], f"{path}[{index}]")
        ]
    if not isinstance(value, dict):
        return []
    if "additionalProperties" in schema:
        return [f for key, item in value.items() for f in _unknown_fields(item, schema["additionalProperties"], path)]
    properties = schema.get("properties", {})
    unknown = [f"{path}.{key}" for key in value if key not in properties]
    return unknown + [
        f
        for key, item in value.items()
        if key in properties
        for f in _unknown_fields(item, properties[key], f"{path}.{key}")
    ]


def test_every_crd_stores_v1beta2_serves_v1beta1_and_converts_through_the_webhook() -> None:
    for kind, manifest in MANIFESTS.items():
        spec = manifest["spec"]
        assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [
            ("v1beta2", True, True),
            ("v1beta1", True, False),
        ], kind
        assert spec["conversion"] == {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {
                        "name": "kuota-webhook-conversion",
                        "namespace": "kuota-system",
                        "path": "/convert",
                        "port": 443,
                    }
                },
            },
        }, kind


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_each_version_schema_keeps_every_field_the_conversion_writes(case: str) -> None:
    for obj in PAIRS[case]:
        version = obj["apiVersion"].rsplit("/", 1)[1]
        assert _unknown_fields(obj, _schema(obj["kind"], version), "") == [], f"{obj['kind']} {version}"


def test_v1beta1_schemas_use_v1beta1_names_in_rules_enums_and_columns() -> None:
    queue = MANIFESTS["ClusterQueue"]["spec"]["versions"][1]
    spec = queue["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "cohort" in spec["properties"] and "cohortName" not in spec["properties"]
    cohort_rules = [rule["rule"] for rule in spec["x-kubernetes-validations"] if "cohort" in rule["rule"]]
    assert cohort_rules
    assert all("cohortName" not in rule and "self.cohort)" in rule for rule in cohort_rules)
    assert spec["properties"]["admissionChecks"]["items"]["type"] == "string", "v1beta1's list of check names"
    assert {"rule": "!has(self.admissionChecks) || !has(self.admissionChecksStrategy)"}.items() <= next(
        rule for rule in spec["x-kubernetes-validations"] if "admissionChecks" in rule["rule"]
    ).items()
    fungibility = spec["properties"]["flavorFungibility"]["properties"]
    assert fungibility["whenCanBorrow"]["enum"] == ["MayStopSearch", "TryNextFlavor", "Borrow"]
    assert fungibility["whenCanPreempt"]["enum"] == ["MayStopSearch", "TryNextFlavor", "Preempt"]
    assert queue["additionalPrinterColumns"][0]["jsonPath"] == ".spec.cohort"
    workload = _schema("Workload", "v1beta1")["properties"]["spec"]["properties"]
    assert workload["priorityClassSource"]["enum"] == [
        "kueue.x-k8s.io/workloadpriorityclass",
        "scheduling.k8s.io/priorityclass",
        "",
    ]
    assert "priorityClassRef" not in workload


def test_the_v1beta2_schemas_are_the_definitions_unchanged() -> None:
    for definition in DEFINITIONS:
        assert MANIFESTS[definition.kind]["spec"]["versions"][0] == definition.manifest()["spec"]["versions"][0]
