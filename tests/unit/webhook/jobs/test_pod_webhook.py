"""The Pod rules: a labelled pod is gated, marked and held by a finalizer; its owner's pods are never gated; a
labelled object of a kind kuota does not manage is admitted with a warning naming the kind."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.engine.model import LabelSelector
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity
from kuota.webhook.admission.pod_policy import default_pod, validate_pod
from kuota.webhook.admission.reviews import AdmissionRequest, GroupVersionKind, Operation, UserInfo
from kuota.webhook.admission.unmanaged import warn_unmanaged
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs.registry import select
from tests.examples import examples
from tests.unit.webhook.admission.static_facts import StaticClusterFacts, apply_patch

KUOTA = UserInfo("system:serviceaccount:kuota-system:kuota-manager", frozenset())
ALICE = UserInfo("alice", frozenset({"system:authenticated"}))
POLICY = JobPolicy(
    manage_jobs_without_queue_name=False,
    managed_jobs_namespace_selector=LabelSelector(),
    kuota=KuotaIdentity(usernames=frozenset({KUOTA.username})),
    integrations=select(["batch/job", "pod"]).registry,
)
JOBS_ONLY = JobPolicy(False, LabelSelector(), POLICY.kuota, select(["batch/job"]).registry)
POD = GroupVersionKind("", "v1", "Pod")


def a_pod(labels: dict[str, str] | None = None, owner: str | None = None, gates: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "notebook", "namespace": "research"}
    if labels is not None:
        metadata["labels"] = labels
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": owner, "name": "o", "uid": "u", "controller": True}
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if gates:
        spec["schedulingGates"] = [{"name": pods.ADMISSION_GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def request(
    obj: dict[str, Any],
    operation: Operation = "CREATE",
    old: dict[str, Any] | None = None,
    user: UserInfo = ALICE,
    kind: GroupVersionKind = POD,
) -> AdmissionRequest:
    return AdmissionRequest("u-1", kind, operation, "research", "notebook", user, obj, old, False)


def test_a_labelled_pod_is_gated_marked_managed_and_held_by_kueues_finalizer() -> None:
    # Kueue's pod webhook gates every pod it suspends by topology too, TopologyAwareScheduling being on by default
    # ("pod with TAS", pod_webhook_test.go; its other cases turn the gate off): whether the pod's Workload is placed
    # by topology (asked, or implied by a TAS-only queue) is known only at admission, and a gate cannot be added
    # later.
    labelled = a_pod({"kueue.x-k8s.io/queue-name": "research-queue"})
    verdict = default_pod(request(labelled), POLICY, StaticClusterFacts())
    defaulted = apply_patch(labelled, list(verdict.patch))
    assert defaulted["spec"]["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/admission"},
        {"name": "kueue.x-k8s.io/topology"},
    ]
    assert defaulted["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert defaulted["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    again = default_pod(request(defaulted), POLICY, StaticClusterFacts())
    assert apply_patch(defaulted, list(again.patch)) == defaulted  # idempotent


def test_a_pod_without_a_queue_is_left_alone_unless_its_namespace_has_a_default_queue() -> None:
    assert default_pod(request(a_pod({"app": "web"})), POLICY, StaticClusterFacts()).patch == ()
    facts = StaticClusterFacts(local_queues={("research", "default")})
    defaulted = apply_patch(a_pod(), list(default_pod(request(a_pod()), POLICY, facts).patch))
    assert defaulted["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert pods.is_gated(defaulted)


def test_a_pod_owned_by_a_managed_job_is_never_gated_twice() -> None:
    labelled = a_pod({"kueue.x-k8s.io/queue-name": "research-queue"}, owner="Job")
    assert default_pod(request(labelled), POLICY, StaticClusterFacts()).patch == ()
    # A pod of a kind kuota does not manage (a CronJob is not a pod's controller; a ReplicaSet is) is gated.
    other = a_pod({"kueue.x-k8s.io/queue-name": "research-queue"}, owner="ReplicaSet")
    assert default_pod(request(other), POLICY, StaticClusterFacts()).patch != ()


def test_only_kuota_removes_the_admission_gate() -> None:
    labels = {"kueue.x-k8s.io/queue-name": "q", pods.MANAGED_LABEL: "true"}
    gated, ungated = a_pod(labels, gates=True), a_pod(labels)
    denied = validate_pod(request(ungated, "UPDATE", old=gated), POLICY, StaticClusterFacts())
    assert not denied.allowed and "only kuota removes its scheduling gate" in denied.message
    assert validate_pod(request(ungated, "UPDATE", old=gated, user=KUOTA), POLICY, StaticClusterFacts()).allowed


def test_a_grouped_pod_needs_its_groups_size_and_a_valid_queue_name() -> None:
    grouped = a_pod({"kueue.x-k8s.io/queue-name": "q", pods.MANAGED_LABEL: "true", pods.GROUP_NAME_LABEL: "g"})
    denied = validate_pod(request(grouped), POLICY, StaticClusterFacts())
    assert (denied.allowed, denied.code) == (False, 422)
    assert "kueue.x-k8s.io/pod-group-total-count" in denied.message
    bad_queue = validate_pod(request(a_pod({"kueue.x-k8s.io/queue-name": "Not_A_Name"})), POLICY, StaticClusterFacts())
    assert not bad_queue.allowed and "is not a valid LocalQueue name" in bad_queue.message


def test_a_malformed_pod_is_named_in_one_line() -> None:
    broken = a_pod()
    broken["spec"]["schedulingGates"] = "gate"
    with pytest.raises(MalformedObjectError, match=r"spec\.schedulingGates must be an array of objects"):
        default_pod(request(broken), POLICY, StaticClusterFacts())


DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")
CRON_JOB = GroupVersionKind("batch", "v1", "CronJob")
LABELLED = {"kueue.x-k8s.io/queue-name": "research-queue"}


def test_a_labelled_object_of_an_unmanaged_kind_is_warned_about_by_kind() -> None:
    deployment = {"metadata": {"name": "web", "labels": LABELLED}, "spec": {}}
    verdict = warn_unmanaged(request(deployment, kind=DEPLOYMENT), POLICY)
    assert verdict.allowed
    (warning,) = verdict.warnings
    assert "kuota does not manage apps/v1 Deployment" in warning and "batch/job, pod" in warning
    # Pods without the pod integration are just as unmanaged.
    assert warn_unmanaged(request(a_pod(LABELLED)), JOBS_ONLY).warnings
    assert not warn_unmanaged(request(a_pod(LABELLED)), POLICY).warnings


def test_managed_kinds_owned_objects_and_cron_jobs_with_a_labelled_template_are_not_warned_about() -> None:
    job = {"metadata": {"name": "train", "labels": LABELLED}, "spec": {}}
    assert not warn_unmanaged(request(job, kind=GroupVersionKind("batch", "v1", "Job")), POLICY).warnings
    assert not warn_unmanaged(request(a_pod(LABELLED, owner="Job")), JOBS_ONLY).warnings
    template = {"metadata": {"labels": LABELLED}, "spec": {}}
    cron = {"metadata": {"name": "nightly", "labels": LABELLED}, "spec": {"jobTemplate": template}}
    assert not warn_unmanaged(request(cron, kind=CRON_JOB), POLICY).warnings
    cron["spec"]["jobTemplate"] = {"spec": {}}
    (warning,) = warn_unmanaged(request(cron, kind=CRON_JOB), POLICY).warnings
    assert "put the label in the jobTemplate" in warning


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
FIELDS = ["metadata", "spec", "labels", "annotations", "ownerReferences", "schedulingGates", "finalizers", "name"]
field_names = st.sampled_from([*FIELDS, "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/pod-group-name"])
objects = st.recursive(
    json_values,
    lambda children: st.dictionaries(field_names | st.text(max_size=6), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(obj=st.dictionaries(field_names, objects, max_size=4), old=st.dictionaries(field_names, objects, max_size=4))
def test_a_hostile_pod_is_answered_or_named_never_a_crash(obj: dict[str, Any], old: dict[str, Any]) -> None:
    for rule in (default_pod, validate_pod):
        try:
            rule(request(obj, "UPDATE", old=old), POLICY, StaticClusterFacts())
            rule(request(obj), POLICY, StaticClusterFacts())
        except MalformedObjectError:
            pass
    warn_unmanaged(request(obj, kind=DEPLOYMENT), POLICY)


def test_a_managed_pods_bad_topology_annotations_are_refused_in_kueues_words() -> None:
    # Kueue's pod webhook: ValidateTASPodSetRequest on a managed pod's metadata
    pod = a_pod({"kueue.x-k8s.io/queue-name": "research-queue", pods.MANAGED_LABEL: "true"}, gates=True)
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-slice-size": "2"}
    denied = validate_pod(request(pod), POLICY, StaticClusterFacts())
    assert (denied.allowed, denied.code) == (False, 422)
    assert denied.message == (
        "Pod research/notebook: metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Forbidden: may not be set "
        "when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified"
    )
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}
    assert validate_pod(request(pod), POLICY, StaticClusterFacts()).allowed
