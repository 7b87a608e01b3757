"""LeaderWorkerSet as Kueue v0.20 governs it: both pod templates are marked (suspending parent, serving group, queue
and priority-class labels), one Workload per group with pod sets ``leader`` and ``worker`` named as Kueue names
them, the marked pods gated and managed, then put in their group from the LeaderWorkerSet."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from kuota.engine.model import LabelSelector
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity, mutate_path
from kuota.webhook.admission.pod_parent_policy import default_parent, validate_parent
from kuota.webhook.admission.pod_policy import default_pod, validate_pod
from kuota.webhook.admission.reviews import AdmissionRequest, Operation, UserInfo
from kuota.webhook.controller.pod_reconciler import LEADERWORKERSET as LWS_KEY_KIND
from kuota.webhook.controller.pod_reconciler import pod_job_key
from kuota.webhook.controller.state import POD_GROUP, owner_job
from kuota.webhook.jobs import leaderworkerset
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs.pod_parents import LEADERWORKERSET
from kuota.webhook.jobs.registry import select
from tests.unit.webhook.admission.static_facts import StaticClusterFacts, apply_patch

ALICE = UserInfo("alice", frozenset({"system:authenticated"}))
KUOTA = KuotaIdentity(usernames=frozenset({"kuota"}))
FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
LWS_ONLY = JobPolicy(False, LabelSelector(), KUOTA, select([FRAMEWORK]).registry)
QUEUE = "kueue.x-k8s.io/queue-name"
GPU = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}


def an_lws(labels: dict[str, str] | None, *, leader: bool = True, size: int = 3, replicas: int = 2) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "llm", "namespace": "serving", "uid": "5e1f"}
    if labels is not None:
        metadata["labels"] = labels
    worker = {"metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [{"name": "w", "resources": GPU}]}}
    templates: dict[str, Any] = {"size": size, "workerTemplate": worker}
    if leader:
        templates["leaderTemplate"] = {"spec": {"containers": [{"name": "l", "image": "llm:1"}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": metadata,
        "spec": {"replicas": replicas, "leaderWorkerTemplate": templates},
    }


def review(obj: dict[str, Any], operation: Operation = "CREATE", old: dict[str, Any] | None = None) -> AdmissionRequest:
    return AdmissionRequest("u", LEADERWORKERSET.kind, operation, "serving", "llm", ALICE, obj, old, False)


def defaulted(lws: dict[str, Any]) -> dict[str, Any]:
    return apply_patch(lws, list(default_parent(review(lws), LWS_ONLY, StaticClusterFacts(), LEADERWORKERSET).patch))


def a_pod(lws: dict[str, Any], template: str, group: str | None, worker: str) -> dict[str, Any]:
    """A pod as the LeaderWorkerSet controller and its webhook make it (their labels), not yet reviewed by kuota."""
    spec = copy.deepcopy(lws["spec"]["leaderWorkerTemplate"][template])
    metadata = spec.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), leaderworkerset.NAME_LABEL: "llm"}
    labels[leaderworkerset.WORKER_INDEX_LABEL] = worker
    if group is not None:
        labels[leaderworkerset.GROUP_INDEX_LABEL] = group
    pod_metadata = {**metadata, "labels": labels, "name": f"llm-{group}-{worker}", "namespace": "serving"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": spec["spec"]}


def admitted_pod(pod: dict[str, Any]) -> dict[str, Any]:
    request = AdmissionRequest("u", pods.POD_KIND, "CREATE", "serving", "p", ALICE, pod, None, False)
    return apply_patch(pod, list(default_pod(request, LWS_ONLY, StaticClusterFacts()).patch))


def test_both_templates_carry_the_mark_the_serving_group_and_the_queue_but_not_the_managed_label() -> None:
    lws = defaulted(an_lws({QUEUE: "inference", "kueue.x-k8s.io/priority-class": "high"}))
    for template in ("leaderTemplate", "workerTemplate"):
        metadata = lws["spec"]["leaderWorkerTemplate"][template]["metadata"]
        assert metadata["annotations"] == {
            "kueue.x-k8s.io/pod-suspending-parent": FRAMEWORK,
            "kueue.x-k8s.io/pod-group-serving": "true",
        }
        assert metadata["labels"][QUEUE] == "inference"
        assert metadata["labels"]["kueue.x-k8s.io/priority-class"] == "high"
        assert "kueue.x-k8s.io/managed" not in metadata["labels"]
    assert default_parent(review(lws, "UPDATE", lws), LWS_ONLY, StaticClusterFacts(), LEADERWORKERSET).patch == ()
    unqueued = an_lws(None)
    assert default_parent(review(unqueued), LWS_ONLY, StaticClusterFacts(), LEADERWORKERSET).patch == ()


def test_each_group_has_its_own_workload_named_as_kueue_names_it() -> None:
    lws = an_lws({QUEUE: "inference"}, replicas=3)
    names = leaderworkerset.group_workload_names(lws)
    for index, name in enumerate(names):
        # Kueue's GetWorkloadName: the owner name is "<name>-<group index>", hashed with the kind, group and uid.
        digest = hashlib.sha1(f"LeaderWorkerSet\nleaderworkerset.x-k8s.io\nllm-{index}\n5e1f".encode()).hexdigest()
        assert name == f"leaderworkerset-llm-{index}-{digest[:5]}"
    assert len(set(names)) == 3


def rolling(
    replicas: int, status_replicas: int, updated: int, max_surge: int | str | None, *, updating: bool = False
) -> dict[str, Any]:
    """A LeaderWorkerSet as its controller reports it mid-rollout (``status.replicas``: its leader StatefulSet's)."""
    lws = an_lws({QUEUE: "inference"}, replicas=replicas)
    if max_surge is not None:
        lws["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": max_surge}}
    condition = {"type": "UpdateInProgress", "status": "True" if updating else "False", "reason": "GroupsUpdating"}
    lws["status"] = {"replicas": status_replicas, "updatedReplicas": updated, "conditions": [condition]}
    return lws


def test_the_surge_groups_of_a_rolling_update_have_workloads_too() -> None:
    # Kueue's leaderworkerset_reconciler_test "should keep surge workloads during active rolling update with
    # maxSurge": replicas 2, status.replicas 3, 1 group updated, maxSurge 1: groups 0, 1 and 2 keep Workloads.
    lws = rolling(2, 3, 1, 1)
    assert leaderworkerset.group_workload_names(lws) == [leaderworkerset.group_workload_name(lws, i) for i in range(3)]
    # a percentage surges at least one group in the LeaderWorkerSet controller, so it is surge as well
    assert leaderworkerset.governed_groups(rolling(2, 3, 1, "50%")) == 3
    # the surge group counts as updated: with an old group updated too, "2 of 2 updated" while group 0 is still
    # old and the surge group runs until the controller removes it: it keeps its Workload while the update is on
    assert leaderworkerset.governed_groups(rolling(2, 3, 2, 1, updating=True)) == 3


def test_outside_a_rolling_update_with_surge_the_groups_beyond_replicas_lose_their_workloads() -> None:
    # Kueue's "should delete excess workload on scale down with maxSurge configured but no active rolling update":
    # replicas 1, status.replicas 2 (the scale-down not seen through yet), 1 group updated: only group 0.
    assert leaderworkerset.governed_groups(rolling(1, 2, 1, 1)) == 1
    assert leaderworkerset.governed_groups(rolling(2, 3, 1, 0)) == 2  # no surge: maxSurge 0
    assert leaderworkerset.governed_groups(rolling(2, 3, 1, None)) == 2  # nor none
    assert leaderworkerset.governed_groups(rolling(2, 3, 1, "0%")) == 2
    assert leaderworkerset.governed_groups(rolling(2, 3, 2, 1)) == 2  # every group updated: the surge is over
    assert leaderworkerset.governed_groups(rolling(3, 1, 0, 1)) == 3  # scaling up: status.replicas lags behind


def test_a_groups_workload_has_a_leader_and_size_minus_one_workers_and_belongs_to_the_lws() -> None:
    lws = an_lws({QUEUE: "inference"}, size=4)
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][leaderworkerset.NAME_LABEL] = "llm"
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        "leaderworkerset.sigs.k8s.io/size": "4"
    }
    workload = leaderworkerset.group_workload(lws, 1)
    assert workload["metadata"]["name"] == leaderworkerset.group_workload_name(lws, 1)
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("leader", 1), ("worker", 3)]
    worker = workload["spec"]["podSets"][1]["template"]
    assert worker["metadata"] == {"labels": {"app": "llm", leaderworkerset.NAME_LABEL: "llm"}}  # LWS's own dropped
    assert workload["spec"]["queueName"] == "inference"
    assert workload["metadata"]["annotations"] == {"kuota.dev/serving": "true"}
    [owner] = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("LeaderWorkerSet", "llm", None)
    assert owner_job(workload) == (LWS_KEY_KIND, "serving/llm")
    alone = leaderworkerset.group_workload(an_lws({QUEUE: "inference"}, leader=False, size=2), 0)
    assert [(p["name"], p["count"]) for p in alone["spec"]["podSets"]] == [("main", 2)]


def test_a_marked_pod_is_gated_and_managed_without_a_finalizer_then_joins_its_group() -> None:
    lws = defaulted(an_lws({QUEUE: "inference"}))
    leader = admitted_pod(a_pod(lws, "leaderTemplate", "1", "0"))
    assert pods.is_gated(leader) and pods.is_managed(leader)
    assert "finalizers" not in leader["metadata"]
    assert pods.group_name(leader) is None
    assert pod_job_key(leader) == (LWS_KEY_KIND, "serving/llm")  # the LeaderWorkerSet reconciler groups it
    assert validate_pod(
        AdmissionRequest("u", pods.POD_KIND, "CREATE", "serving", "p", ALICE, leader, None, False),
        LWS_ONLY,
        StaticClusterFacts(),
    ).allowed
    patch = leaderworkerset.group_patch(lws, leader)
    assert patch is not None
    grouped = copy.deepcopy(leader)
    for field, values in patch["metadata"].items():
        grouped["metadata"].setdefault(field, {}).update(values)
    group = leaderworkerset.group_workload_name(lws, 1)
    assert pod_job_key(grouped) == (POD_GROUP, f"serving/{group}")
    assert pods.is_serving(grouped) and pods.role_hash(grouped) == "leader"
    assert grouped["metadata"]["annotations"][pods.GROUP_TOTAL_COUNT_ANNOTATION] == "3"
    worker = admitted_pod(a_pod(lws, "workerTemplate", "1", "2"))
    assert leaderworkerset.group_patch(lws, worker)["metadata"]["annotations"][pods.ROLE_HASH_ANNOTATION] == "worker"
    not_yet = admitted_pod(a_pod(lws, "leaderTemplate", None, "0"))
    assert leaderworkerset.group_patch(lws, not_yet) is None  # its group index comes from the LWS's own webhook


def test_a_pod_marked_by_hand_without_a_leaderworkerset_is_left_alone() -> None:
    lws = defaulted(an_lws({QUEUE: "inference"}))
    pod = a_pod(lws, "leaderTemplate", "0", "0")
    del pod["metadata"]["labels"][leaderworkerset.NAME_LABEL]
    request = AdmissionRequest("u", pods.POD_KIND, "CREATE", "serving", "p", ALICE, pod, None, False)
    assert default_pod(request, LWS_ONLY, StaticClusterFacts()).patch == ()


def test_a_queued_lws_may_scale_but_its_pod_shape_is_fixed() -> None:
    old = defaulted(an_lws({QUEUE: "inference"}))
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    facts = StaticClusterFacts()
    assert validate_parent(review(scaled, "UPDATE", old), LWS_ONLY, facts, LEADERWORKERSET).allowed
    bigger = copy.deepcopy(old)
    bigger["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "2"}
    }
    refused = validate_parent(review(bigger, "UPDATE", old), LWS_ONLY, facts, LEADERWORKERSET)
    assert not refused.allowed
    assert "spec.leaderWorkerTemplate.workerTemplate.spec's requests" in refused.message
    leaderless = copy.deepcopy(old)
    del leaderless["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    refused = validate_parent(review(leaderless, "UPDATE", old), LWS_ONLY, facts, LEADERWORKERSET)
    assert not refused.allowed and "leaderTemplate" in refused.message
    rolled = copy.deepcopy(old)
    rolled["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["image"] = "llm:2"
    assert validate_parent(review(rolled, "UPDATE", old), LWS_ONLY, facts, LEADERWORKERSET).allowed


def test_the_framework_turns_on_kueues_webhook_paths_and_the_pod_gate() -> None:
    registry = select([FRAMEWORK]).registry
    assert registry.pod_parents == (LEADERWORKERSET,) and registry.gates_pods
    assert mutate_path(LEADERWORKERSET) == "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
    assert select([FRAMEWORK]).unimplemented == ()


def _grouped(lws: dict[str, Any], leader_level: str, worker_level: str) -> dict[str, Any]:
    templates = lws["spec"]["leaderWorkerTemplate"]
    for name, level in (("leaderTemplate", leader_level), ("workerTemplate", worker_level)):
        annotations = templates[name].setdefault("metadata", {}).setdefault("annotations", {})
        annotations.update({"kueue.x-k8s.io/podset-required-topology": level, "kueue.x-k8s.io/podset-group-name": "g"})
    return lws


def test_a_queued_lws_leader_and_workers_must_ask_one_level_as_one_pod_set_group() -> None:
    # Kueue's LeaderWorkerSet webhook: ValidateTASPodSetRequest on each template, ValidatePodSetGroupingTopology
    # on the leader (1 pod) and the workers (size - 1).
    rack = "example.com/rack"
    sound = defaulted(_grouped(an_lws({QUEUE: "inference"}), rack, rack))
    assert validate_parent(review(sound), LWS_ONLY, StaticClusterFacts(), LEADERWORKERSET).allowed
    split = defaulted(_grouped(an_lws({QUEUE: "inference"}), rack, "kubernetes.io/hostname"))
    refused = validate_parent(review(split), LWS_ONLY, StaticClusterFacts(), LEADERWORKERSET)
    assert not refused.allowed
    assert (
        "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations: Invalid value: must specify "
        "'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology "
        "consistent with 'spec.leaderWorkerTemplate.workerTemplate.metadata.annotations' in group 'g'"
    ) in refused.message
    unqueued = _grouped(an_lws(None), rack, "kubernetes.io/hostname")
    assert validate_parent(review(unqueued), LWS_ONLY, StaticClusterFacts(), LEADERWORKERSET).allowed


def test_each_groups_pod_sets_carry_their_templates_topology_requests() -> None:
    # Kueue's LeaderWorkerSet reconciler builds each pod set's topologyRequest from its template's annotations.
    rack = "example.com/rack"
    sets = leaderworkerset.pod_sets(_grouped(an_lws({QUEUE: "inference"}), rack, rack))
    wanted = {"required": rack, "podSetGroupName": "g"}
    assert [(s["name"], s["count"], s.get("topologyRequest")) for s in sets] == [
        ("leader", 1, wanted),
        ("worker", 2, wanted),
    ]
    assert all("topologyRequest" not in s for s in leaderworkerset.pod_sets(an_lws({QUEUE: "inference"})))
