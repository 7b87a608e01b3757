"""The ProvisioningRequest check's pure rules, case by case as Kueue v0.20 states them
(``pkg/controller/admissionchecks/provisioning/controller_test.go``: test names quoted where a case is Kueue's)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from kuota.webhook.controller import provisioning as rules
from kuota.webhook.jobs.adapter import PodSetPlacement

AT = 1_700_000_000.0


def _config(**spec: Any) -> rules.ProvisioningConfig:
    return rules.parse_config({"metadata": {"name": "config"}, "spec": {"provisioningClassName": "queued", **spec}})


def _pod_set(name: str, count: int, **requests: str) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": requests or {"cpu": "1"}}}
    return {"name": name, "count": count, "template": {"spec": {"containers": [container]}}}


def _workload(*pod_sets: dict[str, Any], counts: dict[str, int] | None = None, **status: Any) -> dict[str, Any]:
    assignments = [
        {"name": p["name"], "flavors": {}, **({"count": counts[p["name"]]} if counts and p["name"] in counts else {})}
        for p in pod_sets
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "uid": "wl-uid", "resourceVersion": "7"},
        "spec": {"podSets": list(pod_sets)},
        "status": {"admission": {"clusterQueue": "q", "podSetAssignments": assignments}, **status},
    }


def _request(attempt: int, *conditions: tuple[str, str], **status: Any) -> dict[str, Any]:
    name = rules.request_name("wl", "check", attempt)
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "provisioningClassName": "queued",
            "parameters": {},
            "podSets": [{"podTemplateRef": {"name": rules.pod_template_name(name, "main")}, "count": 1}],
        },
        "status": {
            "conditions": [{"type": kind, "status": "True", "message": message} for kind, message in conditions],
            **status,
        },
    }


def _entry(state: str = "Pending", **fields: Any) -> dict[str, Any]:
    return {"name": "check", "state": state, "lastTransitionTime": "2023-11-14T22:00:00Z", "message": "", **fields}


def test_names_are_workload_check_attempt_and_long_ones_are_cut_with_a_sha1_suffix() -> None:
    assert rules.request_name("wl", "check", 3) == "wl-check-3"
    assert rules.pod_template_name("wl-check-3", "main") == "ppt-wl-check-3-main"
    long = "w" * 250
    full = f"{long}-check-1"
    cut = rules.request_name(long, "check", 1)
    assert cut == full[:247] + "-" + hashlib.sha1(full.encode()).hexdigest()[:5]
    assert len(cut) == 253
    assert rules.attempt_of("wl-check-12", "wl", "check") == 12
    assert rules.attempt_of("wl-other-1", "wl", "check") is None


def test_retry_strategy_defaults_are_kueues_and_the_backoff_doubles_up_to_its_cap() -> None:
    assert _config().retry == rules.RetryStrategy(limit=3, base_seconds=60, max_seconds=1800)
    retry = rules.RetryStrategy(limit=9, base_seconds=60, max_seconds=1800)
    assert [rules.backoff_seconds(count, retry) for count in range(7)] == [60, 120, 240, 480, 960, 1800, 1800]


@pytest.mark.parametrize(
    ("pod_sets", "counts", "needed"),
    [
        ([_pod_set("ps", 1)], {"ps": 1}, True),  # "positive admitted count needs request"
        ([_pod_set("ps", 1)], None, True),  # "missing admitted count falls back to spec count"
        ([_pod_set("ps", 1)], {"ps": 0}, False),  # "zero admitted count does not need request"
    ],
)
def test_a_request_is_needed_when_a_pod_set_has_pods_after_admission(
    pod_sets: list[dict[str, Any]], counts: dict[str, int] | None, needed: bool
) -> None:
    assert rules.request_needed(_workload(*pod_sets, counts=counts), _config()) is needed


def test_a_missing_assignment_is_an_inconsistency_and_managed_resources_select_pod_sets() -> None:
    workload = _workload(_pod_set("ps", 1))
    workload["status"]["admission"]["podSetAssignments"] = []
    with pytest.raises(ValueError, match="inconsistent podSet assignments"):
        rules.request_needed(workload, _config())
    gpu_only = _config(managedResources=["nvidia.com/gpu"])
    cpu, gpu = _pod_set("cpu", 2), _pod_set("gpu", 1, **{"nvidia.com/gpu": "1"})
    assert not rules.request_needed(_workload(cpu), gpu_only)  # "when no request is needed"
    assert [m.name for m in rules.merged_pod_sets(_workload(cpu, gpu), gpu_only)] == ["gpu"]


def test_merge_policies_join_pod_sets_into_one_entry_with_their_pods_together() -> None:
    first, second = _pod_set("a", 2), _pod_set("b", 3)
    other = _pod_set("c", 1, cpu="2")
    workload = _workload(first, second, other, counts={"b": 1})
    assert [(m.name, m.count) for m in rules.merged_pod_sets(workload, _config())] == [("a", 2), ("b", 1), ("c", 1)]
    identical = _config(podSetMergePolicy="IdenticalPodTemplates")
    assert [(m.name, m.count) for m in rules.merged_pod_sets(workload, identical)] == [("a", 3), ("c", 1)]
    second["template"]["spec"]["containers"][0]["image"] = "other"  # same requests, another image
    similar = _config(podSetMergePolicy="IdenticalWorkloadSchedulingRequirements")
    assert [(m.name, m.count) for m in rules.merged_pod_sets(workload, similar)] == [("a", 3), ("c", 1)]
    assert [m.name for m in rules.merged_pod_sets(workload, identical)] == ["a", "b", "c"]


def test_the_request_carries_config_and_annotation_parameters_and_is_owned_by_the_workload() -> None:
    # "workload with provreq annotation"
    workload = _workload(_pod_set("main", 2))
    workload["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60", "other": "x"}
    config = _config(parameters={"ValidUntilSeconds": "0", "BookingTime": "5m"})
    manifest = rules.request_manifest(workload, "wl-check-1", config, rules.merged_pod_sets(workload, config))
    assert manifest["spec"] == {
        "provisioningClassName": "queued",
        "parameters": {"ValidUntilSeconds": "60", "BookingTime": "5m"},
        "podSets": [{"podTemplateRef": {"name": "ppt-wl-check-1-main"}, "count": 2}],
    }
    assert manifest["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "name": "wl",
            "uid": "wl-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert rules.synced_with_config(workload, manifest, config)
    # "request out of sync": another class or config value makes it stale
    assert not rules.synced_with_config(workload, manifest, _config(parameters={"BookingTime": "6m"}))
    assert not rules.synced_with_config(
        workload, manifest, rules.ProvisioningConfig(**{**config.__dict__, "class_name": "x"})
    )


def test_the_pod_template_gets_the_flavor_placement_and_limits_for_missing_requests() -> None:
    # "when request is needed for one PodSet (resource limit)"
    pod_set = _pod_set("main", 1)
    pod_set["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1", "cpu": "2"},
        "requests": {"cpu": "1"},
    }
    placement = PodSetPlacement("main", {"pool": "a"}, [{"key": "gpu", "operator": "Exists"}])
    template = rules.pod_template(_workload(pod_set), "ppt-x-main", pod_set, placement)
    spec = template["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "a"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert spec["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1", "cpu": "1"}
    assert spec["containers"][0]["image"] == "busybox"
    assert template["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}


def test_the_latest_attempt_in_step_with_the_config_is_the_current_request() -> None:
    # "two provisioning requests; 2 then 1"
    workload = _workload(_pod_set("main", 1))
    second, first = _request(2), _request(1)
    assert rules.current_request(workload, "check", _config(), [second, first]) is second
    assert rules.current_request(workload, "check", _config(parameters={"a": "b"}), [second, first]) is None


def _synced(
    workload: dict[str, Any], request: dict[str, Any] | None, config: rules.ProvisioningConfig | None = None
) -> Any:
    requests = {"check": request} if request is not None else {}
    return rules.synced_entries(workload, {"check": config or _config()}, requests, AT)


def test_provisioned_is_ready_with_the_consume_and_class_annotations_and_node_selector_details() -> None:
    # "when request is provisioned and has NodeSelector specified via ProvisioningClassDetail" (a missing detail
    # is skipped)
    details = [
        {"key": "pool", "valueFromProvisioningClassDetail": "p"},
        {"key": "zone", "valueFromProvisioningClassDetail": "z"},
    ]
    config = _config(podSetUpdates={"nodeSelector": details})
    workload = _workload(_pod_set("main", 1), admissionChecks=[_entry()])
    request = _request(1, ("Provisioned", "ready"), provisioningClassDetails={"p": "pool-1"})
    [entry], messages = _synced(workload, request, config)
    assert entry["state"] == "Ready" and entry["message"] == "ready"
    assert entry["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {
                "autoscaling.x-k8s.io/consume-provisioning-request": "wl-check-1",
                "autoscaling.x-k8s.io/provisioning-class-name": "queued",
            },
            "nodeSelector": {"pool": "pool-1"},
        }
    ]
    assert entry["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert messages == ["Admission check check updated state from Pending to Ready with message: ready"]


def test_failed_retries_with_backoff_once_per_attempt_then_is_rejected_past_the_limit() -> None:
    config = _config(retryStrategy={"backoffLimitCount": 2, "backoffBaseSeconds": 10, "backoffMaxSeconds": 100})
    # "when request fails and is retried"
    [entry], _ = _synced(
        _workload(_pod_set("main", 1), admissionChecks=[_entry()]), _request(1, ("Failed", "x")), config
    )
    assert (entry["state"], entry["message"], entry["requeueAfterSeconds"]) == (
        "Retry",
        "Retrying after failure: x",
        10,
    )
    # after the eviction (retryCount 1) the same failed attempt does not ask again: the next attempt is made
    after = _workload(_pod_set("main", 1), admissionChecks=[_entry(retryCount=1, message="Retrying after failure: x")])
    assert _synced(after, _request(1, ("Failed", "x")), config) is None
    assert rules.next_attempt(after, after["status"]["admissionChecks"][0], _request(1, ("Failed", "x"))) == 2
    [entry], _ = _synced(
        _workload(_pod_set("main", 1), admissionChecks=[_entry(retryCount=1)]), _request(2, ("Failed", "y")), config
    )
    assert (entry["state"], entry["requeueAfterSeconds"]) == ("Retry", 20)
    # "when request fails, and there is no retry": past backoffLimitCount
    [entry], _ = _synced(
        _workload(_pod_set("main", 1), admissionChecks=[_entry(retryCount=2)]), _request(3, ("Failed", "z")), config
    )
    assert (entry["state"], entry["message"]) == ("Rejected", "z")


def test_booking_expired_and_capacity_revoked_follow_kueue() -> None:
    pod_set = _pod_set("main", 1)
    admitted = [{"type": "Admitted", "status": "True"}]
    expired = _request(1, ("Provisioned", "ok"), ("BookingExpired", "gone"))
    expired["status"]["conditions"][0]["status"] = "False"
    # "workload does nothing when admitted and receives the provisioning request's BookingExpired condition"
    ready = _workload(pod_set, admissionChecks=[_entry("Ready")], conditions=admitted)
    assert _synced(ready, expired) is None
    # "workload retries the admission check when is not admitted and receives ... BookingExpired"
    [entry], _ = _synced(_workload(pod_set, admissionChecks=[_entry()]), expired)
    assert (entry["state"], entry["message"]) == ("Retry", "Retrying after booking expired: gone")
    # "workload sets AdmissionCheck status to Rejected when it is not finished and receives ... CapacityRevoked"
    revoked = _request(1, ("CapacityRevoked", "nodes gone"))
    [entry], _ = _synced(_workload(pod_set, admissionChecks=[_entry("Ready")], conditions=admitted), revoked)
    assert (entry["state"], entry["message"]) == ("Rejected", "nodes gone")
    finished = _workload(
        pod_set, admissionChecks=[_entry("Ready")], conditions=[{"type": "Finished", "status": "True"}]
    )
    assert _synced(finished, revoked) is None


def test_no_condition_clears_the_message_and_a_needed_request_not_made_yet_writes_nothing() -> None:
    # "when the request has no conditions yet the previous check message is cleared"
    workload = _workload(_pod_set("main", 1), admissionChecks=[_entry(message="Error creating PodTemplate")])
    [entry], messages = _synced(workload, _request(1))
    assert (entry["state"], entry["message"], messages) == ("Pending", "", [])
    assert _synced(workload, None) is None
    assert rules.next_attempt(workload, workload["status"]["admissionChecks"][0], None) == 1
    # an inactive check (no config) is Pending, "the check is not active"
    [entry], _ = rules.synced_entries(workload, {"check": None}, {}, AT)
    assert (entry["state"], entry["message"]) == ("Pending", "the check is not active")


def test_the_active_condition_names_what_is_wrong_with_the_parameters_reference() -> None:
    configs = {"config": _config()}
    reference = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "config"}

    def active(parameters: dict[str, Any] | None) -> tuple[str, str, str]:
        return rules.active_condition(
            {"spec": {"controllerName": rules.CONTROLLER_NAME, "parameters": parameters}}, configs
        )

    assert active(reference) == ("True", "Active", "The admission check is active")
    assert active(None) == ("False", "BadParametersRef", "missing parameters reference")
    assert active({**reference, "kind": "Other"})[2] == (
        'wrong kind "Other", expecting "ProvisioningRequestConfig": bad parameters reference'
    )
    assert active({**reference, "name": "gone"})[2] == 'provisioningrequestconfigs.kueue.x-k8s.io "gone" not found'
