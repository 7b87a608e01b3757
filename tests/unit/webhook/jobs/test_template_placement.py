"""What every upstream kind's adapter does to its pod templates: an admission places each pod set's template, an
eviction puts them back as submitted, and a contradicting selector is a conflict, not an override."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kuota.webhook.controller.errors import JobConflictError
from kuota.webhook.jobs import batch_job, jobset, kubeflow, raycluster, rayjob, rayservice
from kuota.webhook.jobs.adapter import JobAdapter, PodSetPlacement
from tests.unit.webhook.jobs import objects
from tests.unit.webhook.jobs.merge_patch import apply_merge_patch

FLAVOR_TOLERATION = {"key": "capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}

KINDS: list[tuple[JobAdapter, Callable[[], dict[str, Any]]]] = [
    (jobset.ADAPTER, objects.jobset),
    (raycluster.ADAPTER, objects.raycluster),
    (rayjob.ADAPTER, lambda: objects.rayjob(submitter=objects.pod_template(0))),
    (rayservice.ADAPTER, objects.rayservice),
    (kubeflow.PYTORCHJOB, objects.pytorchjob),
    (kubeflow.TFJOB, objects.tfjob),
    (kubeflow.XGBOOSTJOB, objects.xgboostjob),
    (kubeflow.PADDLEJOB, objects.paddlejob),
    (kubeflow.JAXJOB, objects.jaxjob),
    (kubeflow.MPIJOB, objects.mpijob),
]
IDS = [adapter.kind.kind for adapter, _ in KINDS]
EVERY_KIND = [(batch_job.ADAPTER, objects.batch_job), *KINDS]
EVERY_ID = ["Job", *IDS]
CHECK_TOLERATION = {"key": "provisioned", "operator": "Exists", "effect": "NoSchedule"}
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"


def _placements(adapter: JobAdapter, job: dict[str, Any]) -> list[PodSetPlacement]:
    return [
        PodSetPlacement(pod_set.name, {"gpu-type": f"h100-{index}"}, [FLAVOR_TOLERATION])
        for index, pod_set in enumerate(adapter.pod_sets(job))
    ]


@pytest.mark.parametrize(("adapter", "make"), KINDS, ids=IDS)
def test_an_admission_places_every_pod_set_and_unsuspends(
    adapter: JobAdapter, make: Callable[[], dict[str, Any]]
) -> None:
    job = make()
    originals = adapter.pod_sets(job)
    running = apply_merge_patch(job, adapter.run_patch(job, _placements(adapter, job), originals))

    assert not adapter.is_suspended(running)
    for index, pod_set in enumerate(adapter.pod_sets(running)):
        assert pod_set.template["spec"]["nodeSelector"] == {"gpu-type": f"h100-{index}"}, pod_set.name
        assert pod_set.template["spec"]["tolerations"] == [FLAVOR_TOLERATION], pod_set.name
        assert pod_set.template["spec"]["containers"] == originals[index].template["spec"]["containers"]
    assert [(p.name, p.count) for p in adapter.pod_sets(running)] == [(p.name, p.count) for p in originals]


@pytest.mark.parametrize(("adapter", "make"), KINDS, ids=IDS)
def test_an_eviction_restores_every_template_as_submitted(
    adapter: JobAdapter, make: Callable[[], dict[str, Any]]
) -> None:
    job = make()
    originals = adapter.pod_sets(job)
    assert adapter.restore_patch(job, originals) is None  # nothing to put back yet
    running = apply_merge_patch(job, adapter.run_patch(job, _placements(adapter, job), originals))
    stopped = apply_merge_patch(running, adapter.suspend_patch(running))
    assert adapter.is_suspended(stopped)

    patch = adapter.restore_patch(stopped, originals)
    assert patch is not None
    restored = apply_merge_patch(stopped, patch)
    assert [p.template for p in adapter.pod_sets(restored)] == [p.template for p in originals]
    assert adapter.restore_patch(restored, originals) is None


@pytest.mark.parametrize(("adapter", "make"), KINDS, ids=IDS)
def test_a_template_selector_that_contradicts_the_flavor_is_a_conflict(
    adapter: JobAdapter, make: Callable[[], dict[str, Any]]
) -> None:
    job = make()
    last = adapter.pod_sets(job)[-1]
    placements = [*_placements(adapter, job)[:-1], PodSetPlacement(last.name, {"app-tier": "gpu"})]
    contradicting = {**last.template, "spec": {**last.template["spec"], "nodeSelector": {"app-tier": "cpu"}}}
    originals = [*adapter.pod_sets(job)[:-1], type(last)(last.name, last.count, contradicting)]

    with pytest.raises(JobConflictError, match=rf"{adapter.kind.kind} research/.*app-tier=cpu.*app-tier=gpu"):
        adapter.run_patch(job, placements, originals)


@pytest.mark.parametrize(("adapter", "make"), KINDS, ids=IDS)
def test_a_job_created_running_is_suspended_by_the_webhook_patch(
    adapter: JobAdapter, make: Callable[[], dict[str, Any]]
) -> None:
    job = make()
    running = apply_merge_patch(job, adapter.run_patch(job, [], adapter.pod_sets(job)))
    assert not adapter.is_suspended(running)
    operations = adapter.suspend_on_create(running)
    assert [operation["op"] for operation in operations] == ["add"]
    assert adapter.is_suspended(apply_merge_patch(running, adapter.suspend_patch(running)))


def _check_placements(adapter: JobAdapter, job: dict[str, Any]) -> list[PodSetPlacement]:
    """A flavor's placement with an AdmissionCheck's podSetUpdates merged in, different for each pod set."""
    return [
        PodSetPlacement(
            pod_set.name,
            {"gpu-type": "h100", "provisioned.example/block": f"block-{index}"},
            [FLAVOR_TOLERATION, CHECK_TOLERATION],
            labels={"provisioned.example/slot": f"slot-{index}"},
            annotations={CONSUME: f"wl-prov-1-{index}"},
        )
        for index, pod_set in enumerate(adapter.pod_sets(job))
    ]


@pytest.mark.parametrize(("adapter", "make"), EVERY_KIND, ids=EVERY_ID)
def test_an_admission_checks_pod_set_updates_reach_every_template_and_an_eviction_takes_them_back(
    adapter: JobAdapter, make: Callable[[], dict[str, Any]]
) -> None:
    job = make()
    originals = adapter.pod_sets(job)
    running = apply_merge_patch(job, adapter.run_patch(job, _check_placements(adapter, job), originals))

    for index, (pod_set, original) in enumerate(zip(adapter.pod_sets(running), originals, strict=True)):
        metadata, spec = pod_set.template["metadata"], pod_set.template["spec"]
        assert metadata["labels"] == {
            **original.template["metadata"]["labels"],
            "provisioned.example/slot": f"slot-{index}",
        }
        assert metadata["annotations"] == {CONSUME: f"wl-prov-1-{index}"}
        assert spec["nodeSelector"] == {
            **(original.template["spec"].get("nodeSelector") or {}),
            "gpu-type": "h100",
            "provisioned.example/block": f"block-{index}",
        }
        assert spec["tolerations"] == [FLAVOR_TOLERATION, CHECK_TOLERATION]

    stopped = apply_merge_patch(running, adapter.suspend_patch(running))
    patch = adapter.restore_patch(stopped, originals)
    assert patch is not None
    restored = apply_merge_patch(stopped, patch)
    assert [p.template for p in adapter.pod_sets(restored)] == [p.template for p in originals]
    assert adapter.restore_patch(restored, originals) is None


@pytest.mark.parametrize(("adapter", "make"), EVERY_KIND, ids=EVERY_ID)
def test_a_pod_set_update_that_contradicts_a_template_label_is_a_conflict(
    adapter: JobAdapter, make: Callable[[], dict[str, Any]]
) -> None:
    job = make()
    placements = [PodSetPlacement(p.name, {}, labels={"app": "serve"}) for p in adapter.pod_sets(job)]
    with pytest.raises(JobConflictError, match=rf"{adapter.kind.kind} research/.*label app=train .*app=serve"):
        adapter.run_patch(job, placements, adapter.pod_sets(job))
