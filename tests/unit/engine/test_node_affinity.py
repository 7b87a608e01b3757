"""Flavor matching by nodeSelector and required node affinity, as Kueue (v0.19+, kubernetes-sigs/kueue#12449)
does it: only the label keys the flavor itself labels count against it, terms are ORed and their expressions
ANDed."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.engine.decoding import parse_workload
from kuota.engine.errors import InvalidObjectError
from kuota.engine.model import PodSet, Requirement
from kuota.engine.quota_engine import Admission, QuotaEngine

from .builders import cluster_queue, engine_with, flavor, quota, workload

GPU = "nvidia.com/gpu"


def _engine(*flavors: tuple[str, dict[str, str]]) -> QuotaEngine:
    objects = [flavor(name, labels) for name, labels in flavors]
    queue = cluster_queue("team", {name: [quota(GPU, 4)] for name, _ in flavors})
    return engine_with(*objects, queue)


def _flavor_for(engine: QuotaEngine, pod_set: PodSet) -> str | None:
    engine.submit(workload("team", "job", pod_sets=(pod_set,)))
    admissions = [d for d in engine.schedule(0.0) if isinstance(d, Admission)]
    return admissions[0].pod_sets[0].flavors[GPU] if admissions else None


def _pod_set(selector: dict[str, str] | None = None, *terms: tuple[Requirement, ...]) -> PodSet:
    return PodSet("main", 1, {GPU: 1}, None, selector or {}, (), tuple(terms))


def _is(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, values)


ZONES = (("zone-a", {"zone": "a", "gen": "3"}), ("zone-b", {"zone": "b", "gen": "5", "fast": "yes"}))


def test_a_node_selector_key_only_another_flavor_labels_does_not_count_against_a_flavor() -> None:
    """Kueue's checkFlavorForPodSets (pkg/scheduler/flavorassigner) uses the flavor's own label keys, not the
    resource group's union: ``pool`` says nothing about the unlabelled flavor's nodes, so it is chosen first."""
    engine = _engine(("unlabelled", {}), ("spot", {"pool": "spot"}))
    assert _flavor_for(engine, _pod_set({"pool": "spot"})) == "unlabelled"


def test_a_node_selector_value_a_flavor_contradicts_rules_it_out() -> None:
    engine = _engine(("on-demand", {"pool": "on-demand"}), ("spot", {"pool": "spot"}))
    assert _flavor_for(engine, _pod_set({"pool": "spot"})) == "spot"


def test_a_node_selector_key_no_flavor_labels_does_not_count() -> None:
    engine = _engine(*ZONES)
    assert _flavor_for(engine, _pod_set({"kubernetes.io/arch": "amd64"})) == "zone-a"


@pytest.mark.parametrize(
    ("requirement", "chosen"),
    [
        (_is("zone", "In", "b"), "zone-b"),
        (_is("zone", "NotIn", "a"), "zone-b"),
        # zone-a does not label fast: the expression says nothing about its nodes, so zone-a, the first, is chosen.
        (_is("fast", "Exists"), "zone-a"),
        (_is("fast", "DoesNotExist"), "zone-a"),
        (_is("gen", "Gt", "4"), "zone-b"),
        (_is("gen", "Lt", "4"), "zone-a"),
        (_is("gen", "Gt", "5"), None),
    ],
)
def test_each_operator_of_a_required_term(requirement: Requirement, chosen: str | None) -> None:
    assert _flavor_for(_engine(*ZONES), _pod_set(None, (requirement,))) == chosen


def test_terms_are_ored_and_expressions_anded() -> None:
    engine = _engine(*ZONES)
    impossible = (_is("zone", "In", "a"), _is("gen", "Gt", "4"))
    assert _flavor_for(engine, _pod_set(None, impossible, (_is("zone", "In", "b"),))) == "zone-b"
    assert _flavor_for(_engine(*ZONES), _pod_set(None, impossible)) is None


def test_expressions_on_keys_no_flavor_labels_are_dropped_and_an_emptied_term_matches_every_flavor() -> None:
    rack_and_zone = (_is("rack", "In", "r1"), _is("zone", "In", "b"))
    assert _flavor_for(_engine(*ZONES), _pod_set(None, rack_and_zone)) == "zone-b"
    # The second term only names a key no flavor has: it matches anything, so the first flavor fits.
    assert _flavor_for(_engine(*ZONES), _pod_set(None, (_is("zone", "In", "b"),), (_is("rack", "In", "r1"),))) == (
        "zone-a"
    )


def test_a_workload_no_flavor_can_host_says_why_per_flavor() -> None:
    engine = _engine(*ZONES)
    assert _flavor_for(engine, _pod_set(None, (_is("zone", "In", "c"),))) is None
    reason = engine.status("team/job").reason or ""
    assert "its required node affinity matches no node of flavor zone-a (node labels: gen=3, zone=a)" in reason
    assert "flavor zone-b (node labels: fast=yes, gen=5, zone=b)" in reason


def _job_workload(affinity: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "affinity": affinity,
                            "containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}],
                        }
                    },
                }
            ],
        },
    }


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def test_a_workloads_required_affinity_is_read_and_preferred_and_pod_affinity_are_not() -> None:
    affinity = _required(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
    )
    affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 1, "preference": {}}]
    affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": []}
    parsed = parse_workload(_job_workload(affinity))
    assert parsed.pod_sets[0].node_affinity == ((_is("zone", "In", "b"),), ())


def test_an_invalid_required_affinity_is_rejected_with_each_field_path() -> None:
    where = "spec.podSets[0].template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    bad = _required(
        {
            "matchExpressions": [
                {"key": "zone", "operator": "Near", "values": ["b"]},
                {"key": "gen", "operator": "Gt", "values": ["4", "5"]},
                {"key": "gen", "operator": "Lt", "values": ["new"]},
                {"key": "zone", "operator": "In"},
                {"key": "fast", "operator": "Exists", "values": ["yes"]},
            ]
        }
    )
    with pytest.raises(InvalidObjectError) as raised:
        parse_workload(_job_workload(bad))
    terms = f"{where}.nodeSelectorTerms[0].matchExpressions"
    assert [str(e) for e in raised.value.errors] == [
        f'{terms}[0].operator: Unsupported value: "Near": supported values: '
        '"DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"',
        f"{terms}[1].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        f'{terms}[2].values[0]: Invalid value: "new": must be an integer',
        f"{terms}[3].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        f"{terms}[4].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
    ]
    with pytest.raises(InvalidObjectError, match="must have at least one node selector term"):
        parse_workload(_job_workload(_required()))
