"""The Job rules: defaulting on create, and the updates kuota refuses."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from kuota.engine.model import LabelSelector, Requirement
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.job_policy import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    JobPolicy,
    KuotaIdentity,
    default_job,
    validate_job,
)
from kuota.webhook.admission.reviews import AdmissionRequest, GroupVersionKind, Operation, UserInfo
from kuota.webhook.jobs import kubeflow, trainjob
from kuota.webhook.jobs.adapter import JobAdapter
from tests.unit.webhook.admission.static_facts import StaticClusterFacts, apply_patch
from tests.unit.webhook.jobs import objects

KUOTA = "system:serviceaccount:kuota-system:kuota-manager"
POLICY = JobPolicy(
    manage_jobs_without_queue_name=False,
    managed_jobs_namespace_selector=LabelSelector(
        match_expressions=(Requirement("kubernetes.io/metadata.name", "NotIn", ("kube-system", "kuota-system")),)
    ),
    kuota=KuotaIdentity(usernames=frozenset({KUOTA}), groups=frozenset({"kuota:controllers"})),
)
MANAGE_ALL = JobPolicy(True, POLICY.managed_jobs_namespace_selector, POLICY.kuota)
ALICE = UserInfo("alice", frozenset({"system:authenticated"}))
JOB = GroupVersionKind("batch", "v1", "Job")


def job(labels: dict[str, str] | None = None, suspend: bool | None = None, uid: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "train", "namespace": "research"}
    if labels is not None:
        metadata["labels"] = labels
    if uid:
        metadata["uid"] = uid
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def request(
    obj: dict[str, Any] | None,
    operation: Operation = "CREATE",
    old: dict[str, Any] | None = None,
    user: UserInfo = ALICE,
    namespace: str = "research",
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u-1",
        kind=JOB,
        operation=operation,
        namespace=namespace,
        name="train",
        user=user,
        object=obj,
        old_object=old,
        dry_run=False,
    )


def mutated(obj: dict[str, Any], facts: StaticClusterFacts, policy: JobPolicy = POLICY) -> dict[str, Any]:
    verdict = default_job(request(obj), policy, facts)
    assert verdict.allowed
    return apply_patch(obj, list(verdict.patch))


def test_labelled_job_is_suspended_at_creation() -> None:
    result = mutated(job({QUEUE_NAME_LABEL: "research-queue"}, suspend=False), StaticClusterFacts())
    assert result["spec"]["suspend"] is True


def test_job_without_queue_label_is_left_alone_when_no_default_queue_exists() -> None:
    verdict = default_job(request(job()), POLICY, StaticClusterFacts())
    assert verdict.allowed
    assert verdict.patch == ()


def test_a_gpu_job_without_queue_label_is_allowed_with_a_warning_that_no_quota_applies() -> None:
    gpu_job = job()
    gpu_job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 4}}
    verdict = default_job(request(gpu_job), POLICY, StaticClusterFacts())
    assert verdict.allowed
    assert verdict.patch == ()
    assert verdict.warnings == (
        "Job research/train requests GPUs but has no kueue.x-k8s.io/queue-name label (and the namespace has no "
        "LocalQueue named default): kuota does not queue it and it counts against no quota",
    )


def test_a_queued_gpu_job_gets_no_warning() -> None:
    gpu_job = job({QUEUE_NAME_LABEL: "research-queue"})
    gpu_job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    assert default_job(request(gpu_job), POLICY, StaticClusterFacts()).warnings == ()


def test_default_local_queue_names_the_queue_and_suspends_the_job() -> None:
    facts = StaticClusterFacts(local_queues={("research", "default")})
    result = mutated(job(), facts)
    assert result["metadata"]["labels"] == {QUEUE_NAME_LABEL: "default"}
    assert result["spec"]["suspend"] is True


def test_default_queue_of_another_namespace_does_not_apply() -> None:
    facts = StaticClusterFacts(local_queues={("other", "default")})
    assert default_job(request(job()), POLICY, facts).patch == ()


def test_default_priority_class_is_added_next_to_existing_labels() -> None:
    facts = StaticClusterFacts(priority_classes={"default"})
    result = mutated(job({"team": "nlp", QUEUE_NAME_LABEL: "q"}), facts)
    assert result["metadata"]["labels"] == {"team": "nlp", QUEUE_NAME_LABEL: "q", PRIORITY_CLASS_LABEL: "default"}


def test_an_explicit_priority_class_is_kept() -> None:
    facts = StaticClusterFacts(priority_classes={"default"})
    result = mutated(job({QUEUE_NAME_LABEL: "q", PRIORITY_CLASS_LABEL: "production"}), facts)
    assert result["metadata"]["labels"][PRIORITY_CLASS_LABEL] == "production"


def test_defaulting_is_idempotent() -> None:
    facts = StaticClusterFacts(local_queues={("research", "default")}, priority_classes={"default"})
    once = mutated(job({"team": "nlp"}), facts)
    assert default_job(request(once), POLICY, facts).patch == ()
    assert mutated(once, facts) == once


def test_manage_jobs_without_queue_name_suspends_jobs_in_selected_namespaces_only() -> None:
    facts = StaticClusterFacts()
    assert mutated(job(), facts, MANAGE_ALL)["spec"]["suspend"] is True
    system = default_job(request(job(), namespace="kube-system"), MANAGE_ALL, facts)
    assert system.patch == ()


def test_only_create_is_defaulted() -> None:
    facts = StaticClusterFacts(local_queues={("research", "default")})
    verdict = default_job(request(job(), operation="UPDATE", old=job()), POLICY, facts)
    assert verdict.allowed
    assert verdict.patch == ()


def test_a_job_without_spec_is_refused_with_the_field_named() -> None:
    broken = job()
    del broken["spec"]
    with pytest.raises(MalformedObjectError, match=r"request\.object\.spec must be an object"):
        default_job(request(broken), POLICY, StaticClusterFacts())


def test_labels_that_are_not_strings_are_refused() -> None:
    broken = job()
    broken["metadata"]["labels"] = {"a": 1}
    with pytest.raises(MalformedObjectError, match="labels must be an object of strings"):
        default_job(request(broken), POLICY, StaticClusterFacts())


def test_wrong_kind_names_both_kinds() -> None:
    wrong = request(job())
    wrong = AdmissionRequest(**{**wrong.__dict__, "kind": GroupVersionKind("", "v1", "Pod")})
    with pytest.raises(MalformedObjectError, match="batch/v1 Job, got v1 Pod"):
        default_job(wrong, POLICY, StaticClusterFacts())


def _update(old: dict[str, Any], change: dict[str, Any], user: UserInfo = ALICE) -> AdmissionRequest:
    new = copy.deepcopy(old)
    new["metadata"].update(change.get("metadata", {}))
    new["spec"].update(change.get("spec", {}))
    return request(new, operation="UPDATE", old=old, user=user)


def test_nobody_but_kuota_unsuspends_a_managed_job() -> None:
    old = job({QUEUE_NAME_LABEL: "q"}, suspend=True, uid="j1")
    denied = validate_job(_update(old, {"spec": {"suspend": False}}), POLICY, StaticClusterFacts())
    assert not denied.allowed
    assert "only kuota unsuspends it" in denied.message
    kuota = UserInfo(KUOTA, frozenset())
    assert validate_job(_update(old, {"spec": {"suspend": False}}, kuota), POLICY, StaticClusterFacts()).allowed


def test_kuota_is_recognised_by_group_as_well_as_username() -> None:
    old = job({QUEUE_NAME_LABEL: "q"}, suspend=True, uid="j1")
    other_replica = UserInfo("system:serviceaccount:kuota-system:other", frozenset({"kuota:controllers"}))
    assert validate_job(_update(old, {"spec": {"suspend": False}}, other_replica), POLICY, StaticClusterFacts()).allowed


def test_removing_suspend_counts_as_unsuspending() -> None:
    old = job({QUEUE_NAME_LABEL: "q"}, suspend=True, uid="j1")
    new = copy.deepcopy(old)
    del new["spec"]["suspend"]
    assert not validate_job(request(new, "UPDATE", old), POLICY, StaticClusterFacts()).allowed


def test_unmanaged_jobs_may_be_unsuspended_by_anyone() -> None:
    old = job(suspend=True, uid="j1")
    assert validate_job(_update(old, {"spec": {"suspend": False}}), POLICY, StaticClusterFacts()).allowed


def test_queue_name_is_immutable_while_the_workload_is_admitted() -> None:
    old = job({QUEUE_NAME_LABEL: "a"}, suspend=True, uid="j1")
    facts = StaticClusterFacts(admitted_jobs={("research", "j1")})
    denied = validate_job(_update(old, {"metadata": {"labels": {QUEUE_NAME_LABEL: "b"}}}), POLICY, facts)
    assert not denied.allowed
    assert "while its Workload is admitted" in denied.message


def test_queue_name_may_change_while_suspended_and_not_admitted() -> None:
    old = job({QUEUE_NAME_LABEL: "a"}, suspend=True, uid="j1")
    change = {"metadata": {"labels": {QUEUE_NAME_LABEL: "b"}}}
    assert validate_job(_update(old, change), POLICY, StaticClusterFacts()).allowed


def test_queue_name_cannot_change_while_the_job_runs() -> None:
    old = job({QUEUE_NAME_LABEL: "a"}, suspend=False, uid="j1")
    denied = validate_job(_update(old, {"metadata": {"labels": {QUEUE_NAME_LABEL: "b"}}}), POLICY, StaticClusterFacts())
    assert not denied.allowed
    assert "only while the Job is suspended" in denied.message


def test_invalid_queue_name_is_refused_as_invalid() -> None:
    denied = validate_job(request(job({QUEUE_NAME_LABEL: "Not_A_Name"}, suspend=True)), POLICY, StaticClusterFacts())
    assert not denied.allowed
    assert denied.code == 422
    assert "'Not_A_Name' is not a valid LocalQueue name" in denied.message


def test_a_managed_job_created_running_is_refused_when_the_mutating_webhook_did_not_run() -> None:
    denied = validate_job(request(job({QUEUE_NAME_LABEL: "q"}, suspend=False)), POLICY, StaticClusterFacts())
    assert not denied.allowed
    assert "spec.suspend: true" in denied.message


def test_update_without_old_object_is_malformed() -> None:
    with pytest.raises(MalformedObjectError, match="oldObject is required"):
        validate_job(request(job(), operation="UPDATE"), POLICY, StaticClusterFacts())


def test_delete_is_not_judged() -> None:
    assert validate_job(request(None, operation="DELETE"), POLICY, StaticClusterFacts()).allowed


def _headless_mpijob() -> dict[str, Any]:
    job = objects.mpijob("headless")
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    return job


@pytest.mark.parametrize(
    ("make", "adapter"),
    [(_headless_mpijob, kubeflow.MPIJOB), (objects.trainjob, trainjob.ADAPTER)],
    ids=["an MPIJob without a launcher", "a TrainJob whose runtime the webhook cannot see"],
)
def test_a_queued_job_whose_pod_sets_cannot_be_read_here_is_let_through_for_the_controller_to_explain(
    make: Callable[[], dict[str, Any]], adapter: JobAdapter
) -> None:
    obj = make()
    obj["metadata"].setdefault("labels", {})[QUEUE_NAME_LABEL] = "q"
    # The controller tells the object why it gets no Workload (ErrWorkloadCompose); the webhook must neither
    # refuse it nor fail on it, or the user meets an internal error instead of that reason.
    review = dataclasses.replace(request(obj), kind=adapter.kind)
    assert validate_job(review, POLICY, StaticClusterFacts(), adapter).allowed


def test_a_job_whose_only_pod_set_names_a_group_or_a_slice_larger_than_itself_is_refused() -> None:
    # Kueue's job webhook: ValidatePodSetGroupingTopology and ValidateSliceSizeAnnotationUpperBound on its pod set
    grouped = job({QUEUE_NAME_LABEL: "q"}, suspend=True)
    grouped["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack", "kueue.x-k8s.io/podset-group-name": "g"}
    }
    denied = validate_job(request(grouped), POLICY, StaticClusterFacts())
    assert (denied.allowed, denied.code) == (False, 422)
    assert "can only define groups of exactly 2 pod sets, got: 1 pod set(s)" in denied.message
    sliced = job({QUEUE_NAME_LABEL: "q"}, suspend=True)
    sliced["spec"]["parallelism"] = 2
    slices = {"kueue.x-k8s.io/podset-slice-required-topology": "rack", "kueue.x-k8s.io/podset-slice-size": "4"}
    sliced["spec"]["template"]["metadata"] = {"annotations": slices}
    denied = validate_job(request(sliced), POLICY, StaticClusterFacts())
    assert not denied.allowed
    assert "must not be greater than pod set count 2" in denied.message
