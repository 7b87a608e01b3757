"""An AppWrapper's pod sets are its components' declared ones, named as Kueue names them; an admission is each pod
set's podSetInfos, which a restore clears; an AppWrapper declaring no pod set makes no Workload."""

from __future__ import annotations

import pytest

from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.jobs import appwrapper
from kuota.webhook.jobs.adapter import Finished, PodSetPlacement
from tests.unit.webhook.jobs import objects
from tests.unit.webhook.jobs.merge_patch import apply_merge_patch

ADAPTER = appwrapper.ADAPTER
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_one_pod_set_per_declared_pod_set_across_components_named_after_the_appwrapper_and_its_index() -> None:
    pod_sets = ADAPTER.pod_sets(objects.appwrapper())
    assert [(p.name, p.count) for p in pod_sets] == [("wrapped-0", 4), ("wrapped-1", 1), ("wrapped-2", 3)]
    gpus = [p.template["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu") for p in pod_sets]
    assert gpus == ["8", "0", "2"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("spec.template", "must start with 'template'"),
        ("template.spec.replicatedJobs[5].template.spec.template", "names nothing in the component"),
    ],
)
def test_a_pod_set_path_that_names_no_pod_template_makes_no_workload(path: str, reason: str) -> None:
    job = objects.appwrapper()
    job["spec"]["components"][1]["podSets"][0]["path"] = path
    with pytest.raises(InvalidJobError, match=reason):
        ADAPTER.pod_sets(job)


def test_an_appwrapper_declaring_no_pod_set_makes_no_workload_and_says_what_to_declare() -> None:
    job = objects.appwrapper()
    del job["spec"]["components"][0]["podSets"]
    with pytest.raises(InvalidJobError, match=r"spec.components\[0\] declares no podSets"):
        ADAPTER.pod_sets(job)


def test_an_admission_is_each_pod_set_s_pod_set_info_and_a_restore_clears_them() -> None:
    job = objects.appwrapper()
    originals = ADAPTER.pod_sets(job)
    placements = [
        PodSetPlacement(p.name, {"gpu-type": f"h100-{i}"}, [TOLERATION], labels={"l": "v"} if i == 2 else {})
        for i, p in enumerate(originals)
    ]
    running = apply_merge_patch(job, ADAPTER.run_patch(job, placements, originals))
    assert not ADAPTER.is_suspended(running)
    infos = [c["podSetInfos"] for c in running["spec"]["components"]]
    assert infos == [
        [{"nodeSelector": {"gpu-type": "h100-0"}, "tolerations": [TOLERATION]}],
        [
            {"nodeSelector": {"gpu-type": "h100-1"}, "tolerations": [TOLERATION]},
            {"nodeSelector": {"gpu-type": "h100-2"}, "tolerations": [TOLERATION], "labels": {"l": "v"}},
        ],
    ]
    assert ADAPTER.pod_sets(running) == originals  # the components' own templates are left as submitted

    stopped = apply_merge_patch(running, ADAPTER.suspend_patch(running))
    restored = apply_merge_patch(stopped, ADAPTER.restore_patch(stopped, originals) or {})
    assert restored["spec"]["components"] == job["spec"]["components"]
    assert ADAPTER.restore_patch(restored, originals) is None


def test_it_finishes_with_its_phase_and_a_failed_one_only_once_its_resources_are_gone() -> None:
    job = objects.appwrapper()
    job["status"] = {"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", "status": "True"}]}
    assert ADAPTER.finished(job) is None
    job["status"]["conditions"] = [{"type": "ResourcesDeployed", "status": "False"}]
    assert ADAPTER.finished(job) == Finished(False, "AppWrapper failed")
    job["status"] = {"phase": "Succeeded", "conditions": [{"type": "PodsReady", "status": "True"}]}
    assert ADAPTER.finished(job) == Finished(True, "AppWrapper finished successfully")
    assert ADAPTER.pods_ready(job)
