"""Plain pods and pod groups as the queue sees them: Workload names and shapes, roles, ungating, finishing."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from kuota.webhook.controller.errors import JobConflictError
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs.adapter import Finished, PodSetPlacement
from kuota.webhook.jobs.topology import TOPOLOGY_GATE

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pod(name: str, gpus: int = 1, group: str | None = None, total: str | None = None, **status: Any) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "research-queue", pods.MANAGED_LABEL: "true"}
    annotations: dict[str, str] = {}
    if group is not None:
        labels[pods.GROUP_NAME_LABEL] = group
    if total is not None:
        annotations[pods.GROUP_TOTAL_COUNT_ANNOTATION] = total
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "research",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "labels": labels,
            "annotations": annotations,
            "finalizers": [pods.MANAGED_FINALIZER],
        },
        "spec": {
            "nodeName": "",
            "schedulingGates": [{"name": pods.ADMISSION_GATE}],
            "containers": [{"name": "c", "image": "trainer", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
        },
        "status": status,
    }


def test_a_single_pods_workload_has_kueues_name_an_owner_and_one_pod_set_of_one() -> None:
    single = pod("notebook")
    digest = hashlib.sha1(b"Pod\n\nnotebook\nuid-notebook").hexdigest()[:5]
    workload = pods.single_workload(single)
    assert workload["metadata"]["name"] == f"pod-notebook-{digest}"
    assert workload["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "notebook", "uid": "uid-notebook", "controller": True,
         "blockOwnerDeletion": True}
    ]  # fmt: skip
    assert workload["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "uid-notebook"}
    assert workload["spec"]["queueName"] == "research-queue"
    (pod_set,) = workload["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 1)
    assert "schedulingGates" not in pod_set["template"]["spec"]
    assert "nodeName" not in pod_set["template"]["spec"]


def test_a_groups_workload_is_named_after_the_group_owned_by_every_pod_with_a_pod_set_per_role() -> None:
    members = [pod("w-0", 4, "ddp", "3"), pod("w-1", 4, "ddp", "3"), pod("driver", 0, "ddp", "3")]
    workload = pods.group_workload("ddp", members)
    assert workload["metadata"]["name"] == "ddp"
    owners = workload["metadata"]["ownerReferences"]
    assert sorted(o["name"] for o in owners) == ["driver", "w-0", "w-1"]
    assert not any(o.get("controller") for o in owners)
    counts = {ps["name"]: ps["count"] for ps in workload["spec"]["podSets"]}
    assert counts == {pods.role_hash(members[0]): 2, pods.role_hash(members[2]): 1}
    assert all(len(name) == 8 for name in counts)


def test_a_role_hash_annotation_wins_and_pods_differing_in_shape_differ_in_role() -> None:
    first, second = pod("a", 1), pod("b", 2)
    assert pods.role_hash(first) != pods.role_hash(second)
    assert pods.role_hash(first) == pods.role_hash(pod("c", 1))
    first["metadata"]["annotations"][pods.ROLE_HASH_ANNOTATION] = "workers"
    assert pods.role_hash(first) == "workers"


@pytest.mark.parametrize(
    ("total", "problem"),
    [(None, "needs annotation"), ("zero", "whole number"), ("0", "whole number"), ("3", None)],
)
def test_the_groups_total_count_must_be_a_whole_number(total: str | None, problem: str | None) -> None:
    found = pods.total_count_problem(pod("w", group="g", total=total))
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_ungating_removes_only_kueues_gate_and_adds_the_flavors_placement() -> None:
    gated = pod("notebook")
    gated["spec"]["schedulingGates"].append({"name": "other.example/gate"})
    gated["spec"]["nodeSelector"] = {"zone": "a"}
    placement = PodSetPlacement("main", {"gpu-type": "h100"}, [GPU_TOLERATION])
    assert pods.ungate_patch(gated, placement) == {
        "spec": {
            "schedulingGates": [{"name": "other.example/gate"}],
            "nodeSelector": {"zone": "a", "gpu-type": "h100"},
            "tolerations": [GPU_TOLERATION],
        }
    }
    assert pods.ungate_patch(pod("x"), None)["spec"]["schedulingGates"] is None


def test_the_topology_gate_stays_only_for_a_pod_set_placed_by_topology() -> None:
    # Kueue's pod reconciler (prepare): the topology gate every managed pod starts with is lifted with the
    # admission gate unless the pod set's placement carries it, for the topology ungater to lift.
    gated = pod("p")
    gated["spec"]["schedulingGates"].append({"name": TOPOLOGY_GATE})
    plain = PodSetPlacement("main", {}, [])
    assert pods.ungate_patch(gated, plain)["spec"]["schedulingGates"] is None
    placed = PodSetPlacement("main", {}, [], scheduling_gates=(TOPOLOGY_GATE,))
    assert pods.ungate_patch(gated, placed)["spec"]["schedulingGates"] == [{"name": TOPOLOGY_GATE}]


def test_an_admission_checks_pod_set_updates_go_on_the_pod_with_its_ungating() -> None:
    gated = pod("notebook")
    placement = PodSetPlacement(
        "main",
        {"gpu-type": "h100"},
        [GPU_TOLERATION],
        labels={"provisioned.example/slot": "slot-0"},
        annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "pod-notebook-prov-1"},
    )
    patch = pods.ungate_patch(gated, placement)
    assert patch["metadata"] == {
        "labels": {**gated["metadata"]["labels"], "provisioned.example/slot": "slot-0"},
        "annotations": {
            **(gated["metadata"].get("annotations") or {}),
            "autoscaling.x-k8s.io/consume-provisioning-request": "pod-notebook-prov-1",
        },
    }
    assert patch["spec"]["nodeSelector"] == {"gpu-type": "h100"}
    assert "metadata" not in pods.ungate_patch(gated, PodSetPlacement("main", {"gpu-type": "h100"}))
    with pytest.raises(JobConflictError, match=r"Pod research/notebook has label .* but an AdmissionCheck sets"):
        key = next(iter(gated["metadata"]["labels"]))
        pods.ungate_patch(gated, PodSetPlacement("main", {}, labels={key: "other"}))


def test_a_pod_selector_contradicting_its_flavor_is_a_conflict_not_an_override() -> None:
    gated = pod("notebook")
    gated["spec"]["nodeSelector"] = {"gpu-type": "a100"}
    with pytest.raises(JobConflictError, match="gpu-type=a100 but its admitted flavor needs gpu-type=h100"):
        pods.ungate_patch(gated, PodSetPlacement("main", {"gpu-type": "h100"}))


def test_a_single_pod_finishes_with_its_phase_and_a_group_once_all_its_pods_have() -> None:
    assert pods.single_finished(pod("a", phase="Running")) is None
    assert pods.single_finished(pod("a", phase="Succeeded")) == Finished(True, "Pod succeeded")
    failed = pods.single_finished(pod("a", phase="Failed", message="OOMKilled"))
    assert failed == Finished(False, "OOMKilled")
    done, running = pod("a", phase="Succeeded"), pod("b", phase="Running")
    assert pods.group_finished([done, running], 2) is None
    assert pods.group_finished([done], 2) is None  # the other pod is not even there yet
    assert pods.group_finished([done, pod("b", phase="Succeeded")], 2) == Finished(
        True, "all 2 pods of the group succeeded"
    )
    assert not pods.group_finished([done, pod("b", phase="Failed")], 2).succeeded  # type: ignore[union-attr]


def test_releasing_the_finalizer_keeps_the_others() -> None:
    managed = pod("a")
    managed["metadata"]["finalizers"] = ["x.example/keep", pods.MANAGED_FINALIZER]
    assert pods.without_finalizer_patch(managed) == {"metadata": {"finalizers": ["x.example/keep"]}}
    assert pods.without_finalizer_patch(pod("b")) == {"metadata": {"finalizers": None}}


def test_a_role_is_kueues_hash_of_the_pods_shape_as_go_writes_it() -> None:
    """Kueue v0.17's GenerateRoleHash: sha256 of json.Marshal({"spec": shape}); the shape's maps keyed in sorted
    order, absent fields as null, the containers' requests and ports only, HTML characters escaped."""
    member = pod("w-0", 4, "ddp", "2")
    member["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "4", "cpu": "1"}, "limits": {}}
    member["spec"]["nodeSelector"] = {"zone": "a<b"}
    go_json = (
        '{"spec":{"affinity":null,"containers":[{"ports":null,"resources":{"requests":{"cpu":"1",'
        '"nvidia.com/gpu":"4"}}}],"initContainers":null,"nodeSelector":{"zone":"a\\u003cb"},"overhead":null,'
        '"priority":null,"resourceClaims":null,"runtimeClassName":null,"tolerations":null,'
        '"topologySpreadConstraints":null}}'
    )
    assert pods.role_hash(member) == hashlib.sha256(go_json.encode()).hexdigest()[:8]
    renamed = pod("w-1", 4, "ddp", "2")
    renamed["spec"]["containers"][0].update(name="other", image="other:2")  # not in Kueue's shape
    assert pods.role_hash(renamed) == pods.role_hash(pod("w-2", 4, "ddp", "2"))


def test_the_kept_essence_of_a_pod_reads_the_same_to_admission_at_a_fraction_of_its_size() -> None:
    full = pod("w-0", 4, "ddp", "2", phase="Running", containerStatuses=[{"name": "c", "state": {"running": {}}}])
    full["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{" + "x" * 4000 + "}"
    full["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    full["spec"]["volumes"] = [{"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]
    full["spec"]["containers"][0].update(env=[{"name": "A", "value": "1"}], volumeMounts=[{"name": "token"}])
    kept = pods.essence(full)
    assert pods.role_hash(kept) == pods.role_hash(full)
    assert pods.single_workload(kept)["spec"]["podSets"][0]["template"]["spec"]["containers"] == [
        {"name": "c", "image": "trainer", "resources": {"requests": {"nvidia.com/gpu": 4}}}
    ]
    assert kept["metadata"]["annotations"] == {pods.GROUP_TOTAL_COUNT_ANNOTATION: "2"}
    assert kept["status"] == {"phase": "Running"}
    assert "volumes" not in kept["spec"] and pods.is_gated(kept) and pods.has_finalizer(kept)


def test_a_groups_excess_pods_are_its_newest_members_the_ungated_and_guarded_kept_first() -> None:
    """Kueue's ``cleanupExcessPods``: beyond the total count, the members created last go; pods with the
    finalizer and pods already ungated are kept before the rest; a Failed pod is no member."""
    older, newer, newest = pod("c"), pod("a"), pod("b")
    for member, created in ((older, "T10"), (newer, "T11"), (newest, "T12")):
        member["metadata"]["creationTimestamp"] = created
    assert pods.excess_pods([newest, older, newer], 2) == [newest]
    assert pods.excess_pods([newest, older, newer], 3) == []
    ungated = pod("d")
    ungated["metadata"]["creationTimestamp"] = "T99"
    ungated["spec"]["schedulingGates"] = []
    assert pods.excess_pods([older, ungated, newer], 2) == [newer]
    unguarded = pod("e")
    unguarded["metadata"]["creationTimestamp"] = "T00"
    unguarded["metadata"]["finalizers"] = []
    assert pods.excess_pods([unguarded, older, newer], 2) == [unguarded]
    failed = pod("f", phase="Failed")
    assert pods.excess_pods([failed, older, newer], 2) == []
    assert pods.members([failed, older]) == [older]


def _ready(name: str, ready: bool, group: str | None = None, total: str | None = None) -> dict[str, Any]:
    conditions = [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True" if ready else "False", "reason": "" if ready else "ContainersNotReady"},
    ]
    return pod(name, 1, group, total, phase="Running", conditions=conditions)


def test_pods_are_ready_as_kueues_pod_integration_says_every_pod_of_the_group_ready() -> None:
    assert pods.pods_ready([_ready("single", True)], 1)
    assert not pods.pods_ready([_ready("single", False)], 1)
    assert not pods.pods_ready([pod("pending")], 1)  # no conditions yet
    gang = [_ready("w-0", True, "ddp", "3"), _ready("w-1", True, "ddp", "3")]
    assert not pods.pods_ready(gang, 3)  # a member is missing (gone, or finished)
    assert pods.pods_ready([*gang, _ready("w-2", True, "ddp", "3")], 3)
    assert not pods.pods_ready([*gang, _ready("w-2", False, "ddp", "3")], 3)


def test_the_kept_essence_keeps_readiness_so_that_its_change_is_news() -> None:
    ready, waiting = pods.essence(_ready("w-0", True)), pods.essence(_ready("w-0", False))
    assert ready["status"] == {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert waiting["status"] == {"phase": "Running"}
    assert pods.is_ready(ready) and not pods.is_ready(waiting)
