"""Deployment and StatefulSet as Kueue v0.20 governs them: the parent's template is marked (a Deployment's also
labelled with its queue), the marked pods are gated without a finalizer, a StatefulSet's pods join the group named
after its Workload, and its Workload is one pod set ``main`` of ``replicas`` pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuota.engine.model import LabelSelector
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity
from kuota.webhook.admission.pod_parent_policy import default_parent, validate_parent
from kuota.webhook.admission.pod_policy import default_pod, validate_pod
from kuota.webhook.admission.reviews import AdmissionRequest, Operation, UserInfo
from kuota.webhook.admission.unmanaged import warn_unmanaged
from kuota.webhook.controller.state import owner_job
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs import pod_parents
from kuota.webhook.jobs.adapter import workload_name
from kuota.webhook.jobs.pod_parents import DEPLOYMENT, STATEFULSET, PodParent
from kuota.webhook.jobs.registry import select
from tests.unit.webhook.admission.static_facts import StaticClusterFacts, apply_patch

ALICE = UserInfo("alice", frozenset({"system:authenticated"}))
KUOTA = KuotaIdentity(usernames=frozenset({"kuota"}))
PARENTS_ONLY = JobPolicy(False, LabelSelector(), KUOTA, select(["deployment", "statefulset"]).registry)
QUEUE = "kueue.x-k8s.io/queue-name"


def a_parent(parent: PodParent, labels: dict[str, str] | None, replicas: int = 4) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "llm", "namespace": "serving", "uid": "0b7e"}
    if labels is not None:
        metadata["labels"] = labels
    gpu = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    template = {"metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [{"name": "m", "resources": gpu}]}}
    return {
        "apiVersion": "apps/v1",
        "kind": parent.kind.kind,
        "metadata": metadata,
        "spec": {"replicas": replicas, "template": template},
    }


def review(
    parent: PodParent, obj: dict[str, Any], operation: Operation = "CREATE", old: dict[str, Any] | None = None
) -> AdmissionRequest:
    return AdmissionRequest("u", parent.kind, operation, "serving", "llm", ALICE, obj, old, False)


def a_pod_of(template_owner: dict[str, Any], owner_kind: str, owner_name: str, owner_uid: str) -> dict[str, Any]:
    template = copy.deepcopy(template_owner["spec"]["template"])
    metadata = {
        **template["metadata"],
        "name": f"{owner_name}-0",
        "namespace": "serving",
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": owner_name, "uid": owner_uid, "controller": True}
        ],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def pod_review(pod: dict[str, Any], operation: Operation = "CREATE", old: dict[str, Any] | None = None) -> Any:
    return AdmissionRequest("u", pods.POD_KIND, operation, "serving", pod["metadata"]["name"], ALICE, pod, old, False)


def test_a_queued_deployments_template_carries_the_mark_its_queue_and_the_managed_label() -> None:
    deployment = a_parent(DEPLOYMENT, {QUEUE: "inference", "kueue.x-k8s.io/priority-class": "high"})
    defaulted = apply_patch(deployment, list(default_parent(review(DEPLOYMENT, deployment), PARENTS_ONLY,
                                                            StaticClusterFacts(), DEPLOYMENT).patch))  # fmt: skip
    template = defaulted["spec"]["template"]["metadata"]
    assert template["annotations"] == {"kueue.x-k8s.io/pod-suspending-parent": "deployment"}
    assert template["labels"] == {
        "app": "llm",
        "kueue.x-k8s.io/managed": "true",
        QUEUE: "inference",
        "kueue.x-k8s.io/priority-class": "high",
    }
    again = default_parent(review(DEPLOYMENT, defaulted, "UPDATE", defaulted), PARENTS_ONLY, StaticClusterFacts(),
                           DEPLOYMENT)  # fmt: skip
    assert again.patch == ()  # idempotent


def test_a_statefulsets_template_is_only_marked_and_an_unqueued_parent_is_left_alone() -> None:
    sts = a_parent(STATEFULSET, {QUEUE: "inference"})
    patch = default_parent(review(STATEFULSET, sts), PARENTS_ONLY, StaticClusterFacts(), STATEFULSET).patch
    assert apply_patch(sts, list(patch))["spec"]["template"]["metadata"] == {
        "labels": {"app": "llm"},
        "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"},
    }
    plain = a_parent(DEPLOYMENT, {"app": "web"})
    assert default_parent(review(DEPLOYMENT, plain), PARENTS_ONLY, StaticClusterFacts(), DEPLOYMENT).patch == ()


def test_the_namespaces_default_queue_reaches_a_deployments_pods() -> None:
    deployment = a_parent(DEPLOYMENT, None)
    facts = StaticClusterFacts(local_queues={("serving", "default")})
    defaulted = apply_patch(
        deployment, list(default_parent(review(DEPLOYMENT, deployment), PARENTS_ONLY, facts, DEPLOYMENT).patch)
    )
    assert defaulted["metadata"]["labels"] == {QUEUE: "default"}
    assert defaulted["spec"]["template"]["metadata"]["labels"][QUEUE] == "default"


def test_a_deployments_pod_is_gated_without_a_finalizer_and_other_pods_are_left_alone() -> None:
    deployment = a_parent(DEPLOYMENT, {QUEUE: "inference"})
    deployment = apply_patch(deployment, list(default_parent(review(DEPLOYMENT, deployment), PARENTS_ONLY,
                                                             StaticClusterFacts(), DEPLOYMENT).patch))  # fmt: skip
    pod = a_pod_of(deployment, "ReplicaSet", "llm-7d9f", "rs-uid")
    gated = apply_patch(pod, list(default_pod(pod_review(pod), PARENTS_ONLY, StaticClusterFacts()).patch))
    assert pods.is_gated(gated) and pods.is_managed(gated)
    assert {"name": "kueue.x-k8s.io/topology"} in gated["spec"]["schedulingGates"]  # as Kueue gates every pod
    assert "finalizers" not in gated["metadata"]
    assert gated["metadata"]["labels"][QUEUE] == "inference"
    named = {**gated, "metadata": {**gated["metadata"], "uid": "p-uid"}}
    assert pods.single_workload(named)["metadata"]["annotations"] == {"kuota.dev/serving": "true"}
    # "pod" itself is not enabled: a labelled pod without the mark is not kuota's
    loose = a_pod_of(a_parent(DEPLOYMENT, None), "ReplicaSet", "x", "y")
    loose["metadata"]["labels"][QUEUE] = "inference"
    assert default_pod(pod_review(loose), PARENTS_ONLY, StaticClusterFacts()).patch == ()


def test_a_statefulsets_pod_joins_the_group_named_after_the_statefulsets_workload() -> None:
    sts = a_parent(STATEFULSET, {QUEUE: "inference"})
    sts = apply_patch(sts, list(default_parent(review(STATEFULSET, sts), PARENTS_ONLY, StaticClusterFacts(),
                                               STATEFULSET).patch))  # fmt: skip
    pod = a_pod_of(sts, "StatefulSet", "llm", "0b7e")
    gated = apply_patch(pod, list(default_pod(pod_review(pod), PARENTS_ONLY, StaticClusterFacts()).patch))
    group = workload_name("llm", "0b7e", STATEFULSET.kind)
    assert group.startswith("statefulset-llm-")
    assert pods.group_name(gated) == group
    assert pods.is_serving(gated) and pods.is_gated(gated) and pods.is_managed(gated)
    assert pods.role_hash(gated) == "main"
    assert "finalizers" not in gated["metadata"]
    assert validate_pod(pod_review(gated), PARENTS_ONLY, StaticClusterFacts()).allowed  # no total count needed


def test_a_statefulsets_workload_is_one_pod_set_main_of_replicas_owned_by_it() -> None:
    sts = a_parent(STATEFULSET, {QUEUE: "inference"}, replicas=3)
    workload = pod_parents.statefulset_workload(sts)
    assert workload["metadata"]["name"] == workload_name("llm", "0b7e", STATEFULSET.kind)
    [owner] = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("StatefulSet", "llm", None)  # as Kueue's
    assert workload["spec"]["queueName"] == "inference"
    assert workload["metadata"]["annotations"] == {"kuota.dev/serving": "true"}  # the report counts it as serving
    [pod_set] = workload["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 3)
    assert pod_set["template"] == {"spec": sts["spec"]["template"]["spec"]}
    assert "topologyRequest" not in pod_set


def test_a_statefulsets_template_annotations_give_its_pod_set_a_topology_request() -> None:
    # Kueue's StatefulSet reconciler: NewPodSetTopologyRequest(template metadata)
    sts = a_parent(STATEFULSET, {QUEUE: "inference"}, replicas=2)
    sts["spec"]["template"].setdefault("metadata", {})["annotations"] = {
        "kueue.x-k8s.io/podset-required-topology": "example.com/rack"
    }
    [pod_set] = pod_parents.statefulset_workload(sts)["spec"]["podSets"]
    assert pod_set["topologyRequest"] == {"required": "example.com/rack"}


def test_a_queued_statefulset_scales_only_to_or_from_zero_as_in_kueue() -> None:
    old = a_parent(STATEFULSET, {QUEUE: "inference"}, replicas=2)

    def verdict(replicas: int) -> Any:
        new = a_parent(STATEFULSET, {QUEUE: "inference"}, replicas=replicas)
        return validate_parent(review(STATEFULSET, new, "UPDATE", old), PARENTS_ONLY, StaticClusterFacts(),
                               STATEFULSET)  # fmt: skip

    assert verdict(0).allowed and verdict(2).allowed
    refused = verdict(3)
    assert not refused.allowed
    assert "changes only to or from 0 (asked 2 -> 3)" in refused.message
    zero = a_parent(STATEFULSET, {QUEUE: "inference"}, replicas=0)
    up = a_parent(STATEFULSET, {QUEUE: "inference"}, replicas=5)
    assert validate_parent(review(STATEFULSET, up, "UPDATE", zero), PARENTS_ONLY, StaticClusterFacts(),
                           STATEFULSET).allowed  # fmt: skip


def test_the_queue_label_is_fixed_once_a_replica_is_ready() -> None:
    old = a_parent(DEPLOYMENT, {QUEUE: "inference"})
    moved = a_parent(DEPLOYMENT, {QUEUE: "batch"})
    facts = StaticClusterFacts()
    assert validate_parent(review(DEPLOYMENT, moved, "UPDATE", old), PARENTS_ONLY, facts, DEPLOYMENT).allowed
    old["status"] = {"readyReplicas": 1}
    refused = validate_parent(review(DEPLOYMENT, moved, "UPDATE", old), PARENTS_ONLY, facts, DEPLOYMENT)
    assert not refused.allowed and "while a replica is ready" in refused.message


def test_a_labelled_deployment_is_not_warned_about_once_its_integration_is_on() -> None:
    deployment = a_parent(DEPLOYMENT, {QUEUE: "inference"})
    assert warn_unmanaged(review(DEPLOYMENT, deployment), PARENTS_ONLY).warnings == ()
    jobs_only = JobPolicy(False, LabelSelector(), KUOTA, select(["batch/job"]).registry)
    [warning] = warn_unmanaged(review(DEPLOYMENT, deployment), jobs_only).warnings
    assert "kuota does not manage apps/v1 Deployment" in warning


def test_a_statefulsets_workload_belongs_to_it_though_its_owner_reference_is_plain() -> None:
    workload = pod_parents.statefulset_workload(a_parent(STATEFULSET, {QUEUE: "inference"}))
    assert owner_job(workload) == ("StatefulSet.apps", "serving/llm")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("spec", {"replicas": 2}, "request.object.spec.template must be an object"),
        ("spec", {"replicas": "two", "template": {}}, "request.object.spec.replicas must be a whole number"),
        ("status", {"readyReplicas": True}, "request.object.status.readyReplicas must be a whole number"),
    ],
)
def test_a_malformed_parent_is_refused_with_the_field_named(field: str, value: Any, said: str) -> None:
    sts = {**a_parent(STATEFULSET, {QUEUE: "inference"}), field: value}
    for rule in (default_parent, validate_parent):
        with pytest.raises(MalformedObjectError, match=said):
            rule(review(STATEFULSET, sts), PARENTS_ONLY, StaticClusterFacts(), STATEFULSET)


def test_a_queued_statefulsets_pod_shape_is_fixed_but_its_image_may_change() -> None:
    old = a_parent(STATEFULSET, {QUEUE: "inference"})
    bigger = copy.deepcopy(old)
    bigger["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    refused = validate_parent(review(STATEFULSET, bigger, "UPDATE", old), PARENTS_ONLY, StaticClusterFacts(),
                              STATEFULSET)  # fmt: skip
    assert not refused.allowed and "requests, ports and scheduling fields are fixed" in refused.message
    rolled = copy.deepcopy(old)
    rolled["spec"]["template"]["spec"]["containers"][0]["image"] = "llm:2"
    assert validate_parent(review(STATEFULSET, rolled, "UPDATE", old), PARENTS_ONLY, StaticClusterFacts(),
                           STATEFULSET).allowed  # fmt: skip
