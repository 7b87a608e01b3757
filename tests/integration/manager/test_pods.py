"""Plain pods and pod groups (integration ``pod``) on the real control plane: gated at creation, admitted as one
Workload (a group as one gang), ungated onto the flavor's nodes, stopped on preemption, their quota returned when
they finish or are deleted; a CronJob's Jobs are governed, a Job's pods are not gated twice, and a labelled
object of a kind kuota does not manage is admitted with a warning."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.nodes import RUN_SECONDS_ANNOTATION
from tests.integration.manager.conftest import KUOTA_NAMESPACE, ensure_namespace, get_json
from tests.integration.manager.guide_objects import VERBATIM
from tests.integration.manager.test_guide import GPU_TOLERATION, gpu_usage
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ADMISSION_GATE = "kueue.x-k8s.io/admission"
FLAVOR_SELECTOR = {"gpu-type": "h100", "capacity-type": "on-demand"}


@pytest.fixture(scope="module")
def manager(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagerProcess]:
    """The manager with Kueue's Configuration enabling plain pods beside Jobs."""
    del kuota_crds
    config = tmp_path_factory.mktemp("pods") / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "integrations:\n  frameworks: [batch/job, pod]\n"
    )
    ensure_namespace(cluster, KUOTA_NAMESPACE, managed=False)
    running = ManagerProcess(cluster, KUOTA_NAMESPACE, identity="manager-pods", extra_args=(f"--config={config}",))
    running.start()
    try:
        yield running
    finally:
        cluster.kubectl("delete", "pods", "--all", "-n", "research", "--wait=false", check=False)
        wait_until(lambda: not get_json(cluster, "pods", "-n", "research")["items"], "research's pods to go", 60)
        running.stop()
        running.unregister()


@pytest.fixture(autouse=True)
def guide_queues(cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]) -> Iterator[None]:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    yield
    # The pods go before the queues (the manager releases their finalizers), so the next test starts empty.
    cluster.kubectl("delete", "pods", "--all", "-n", "research", "--wait=false", check=False)
    wait_until(lambda: not get_json(cluster, "pods", "-n", "research")["items"], "research's pods to be deleted", 60)


def gpu_pod(
    name: str,
    gpus: int,
    *,
    group: tuple[str, int] | None = None,
    priority_class: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "research",
        "labels": {"kueue.x-k8s.io/queue-name": "research-queue", **(labels or {})},
        "annotations": {},
    }
    if group is not None:
        metadata["labels"]["kueue.x-k8s.io/pod-group-name"] = group[0]
        metadata["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = str(group[1])
    if priority_class is not None:
        metadata["labels"]["kueue.x-k8s.io/priority-class"] = priority_class
    container = {
        "name": "trainer",
        "image": "ghcr.io/your-org/trainer:1.0",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def create(cluster: Cluster, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = json.loads(
        cluster.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(manifest)).stdout
    )
    return created


def pod(cluster: Cluster, name: str) -> dict[str, Any] | None:
    found = cluster.kubectl("get", "pod", name, "-n", "research", "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def workload(cluster: Cluster, name: str) -> dict[str, Any] | None:
    found = cluster.kubectl("get", "workload", name, "-n", "research", "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def condition_true(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = (obj or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def single_workload_name(created: dict[str, Any]) -> str:
    """Kueue's name: pod-<name>-<first 5 hex of sha1("Pod\\n\\n<name>\\n<uid>")>."""
    metadata = created["metadata"]
    digest = hashlib.sha1(f"Pod\n\n{metadata['name']}\n{metadata['uid']}".encode()).hexdigest()[:5]
    return f"pod-{metadata['name']}-{digest}"


def running(cluster: Cluster, name: str) -> dict[str, Any]:
    def is_running() -> dict[str, Any] | None:
        found = pod(cluster, name)
        return found if found is not None and found["status"].get("phase") == "Running" else None

    return wait_until(is_running, f"pod research/{name} to run", timeout=60)


def admitted(cluster: Cluster, name: str) -> dict[str, Any]:
    return wait_until(
        lambda: (w := workload(cluster, name)) is not None and condition_true(w, "Admitted") and w,
        f"Workload research/{name} to be admitted",
        timeout=60,
    )


def gone(cluster: Cluster, kind: str, name: str) -> None:
    wait_until(
        lambda: cluster.kubectl("get", kind, name, "-n", "research", check=False).returncode != 0,
        f"{kind} research/{name} to be gone",
        timeout=60,
    )


def test_a_single_pod_is_gated_admitted_as_one_workload_ungated_onto_its_flavor_and_gives_its_quota_back(
    cluster: Cluster,
) -> None:
    created = create(cluster, gpu_pod("notebook", 4))
    assert {"name": ADMISSION_GATE} in created["spec"]["schedulingGates"]
    assert created["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert "kueue.x-k8s.io/managed" in created["metadata"]["finalizers"]

    name = single_workload_name(created)
    admitted_workload = admitted(cluster, name)
    (owner,) = admitted_workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "notebook", True)
    assert [(ps["name"], ps["count"]) for ps in admitted_workload["spec"]["podSets"]] == [("main", 1)]

    started = running(cluster, "notebook")  # on a tainted GPU node: the flavor's toleration reached it
    assert not any(g["name"] == ADMISSION_GATE for g in started["spec"].get("schedulingGates") or [])
    assert started["spec"]["nodeSelector"] == FLAVOR_SELECTOR
    assert GPU_TOLERATION in started["spec"]["tolerations"]
    wait_until(lambda: gpu_usage(cluster, "research") == "4", "research's status to count the pod's 4 GPUs", 30)

    cluster.kubectl("annotate", "pod", "notebook", "-n", "research", f"{RUN_SECONDS_ANNOTATION}=0")
    finished = wait_until(
        lambda: condition_true(w := workload(cluster, name), "Finished") and w, "the pod's Workload to finish", 60
    )
    assert finished["status"]["conditions"]
    wait_until(lambda: gpu_usage(cluster, "research") in ("0", None), "research's GPUs to be free", 30)
    wait_until(
        lambda: (
            "kueue.x-k8s.io/managed"
            not in ((pod(cluster, "notebook") or {}).get("metadata", {}).get("finalizers") or [])
        ),
        "the finished pod's finalizer to be released",
        30,
    )


def test_a_deleted_pending_pod_has_its_workload_deleted(cluster: Cluster) -> None:
    blocker = create(cluster, gpu_pod("blocker", 8))
    admitted(cluster, single_workload_name(blocker))
    waiting = create(cluster, gpu_pod("waiting", 4))
    name = single_workload_name(waiting)
    wait_until(lambda: workload(cluster, name), "the waiting pod's Workload", 30)
    assert not condition_true(workload(cluster, name), "Admitted")
    assert {"name": ADMISSION_GATE} in (pod(cluster, "waiting") or {})["spec"]["schedulingGates"]
    cluster.kubectl("delete", "pod", "waiting", "-n", "research", "--wait=false")
    gone(cluster, "workload", name)
    gone(cluster, "pod", "waiting")


def test_a_preempted_pod_is_stopped_and_its_quota_goes_to_the_preemptor(cluster: Cluster) -> None:
    low = create(cluster, gpu_pod("sweep", 8))
    admitted(cluster, single_workload_name(low))
    running(cluster, "sweep")
    high = create(cluster, gpu_pod("finetune", 8, priority_class="production-finetune"))
    gone(cluster, "pod", "sweep")  # stopped as Kueue stops a pod: deleted
    gone(cluster, "workload", single_workload_name(low))
    admitted(cluster, single_workload_name(high))
    running(cluster, "finetune")


def test_a_pod_group_is_admitted_only_whole_and_preempted_whole(cluster: Cluster) -> None:
    # 3 x 4 GPUs never fit research's 8: no pod of the group starts, not even the two that would fit.
    for index in range(3):
        create(cluster, gpu_pod(f"big-{index}", 4, group=("big", 3)))
    big = wait_until(lambda: workload(cluster, "big"), "the big group's Workload", 30)
    assert sum(ps["count"] for ps in big["spec"]["podSets"]) == 3
    assert sorted(o["name"] for o in big["metadata"]["ownerReferences"]) == ["big-0", "big-1", "big-2"]
    for index in range(3):
        assert {"name": ADMISSION_GATE} in (pod(cluster, f"big-{index}") or {})["spec"]["schedulingGates"]
    cluster.kubectl("delete", "pods", "-n", "research", "-l", "kueue.x-k8s.io/pod-group-name=big", "--wait=false")
    gone(cluster, "workload", "big")

    # A group of 2 waits for its second pod, then both run.
    create(cluster, gpu_pod("ddp-0", 4, group=("ddp", 2)))
    assert workload(cluster, "ddp") is None
    create(cluster, gpu_pod("ddp-1", 4, group=("ddp", 2)))
    group = admitted(cluster, "ddp")
    (pod_set,) = group["spec"]["podSets"]  # one role: both pods have the same shape
    assert pod_set["count"] == 2 and len(pod_set["name"]) == 8
    for name in ("ddp-0", "ddp-1"):
        assert running(cluster, name)["spec"]["nodeSelector"] == FLAVOR_SELECTOR

    create(cluster, gpu_pod("urgent", 4, priority_class="production-finetune"))
    gone(cluster, "pod", "ddp-0")
    gone(cluster, "pod", "ddp-1")  # the whole gang, though 4 GPUs were enough for the preemptor
    running(cluster, "urgent")


def test_a_groups_pods_beyond_its_total_count_are_deleted_newest_first_and_a_failed_pod_is_no_member(
    cluster: Cluster,
) -> None:
    """Kueue's pod group reconciler (``cleanupExcessPods``, ``activePods``): a gang of 2 created with 3 pods loses
    the one created last; a Failed pod does not count, so its replacement completes the gang."""
    for index in range(3):
        create(cluster, gpu_pod(f"extra-{index}", 2, group=("extra", 2)))
    gone(cluster, "pod", "extra-2")
    group = admitted(cluster, "extra")
    assert [ps["count"] for ps in group["spec"]["podSets"]] == [2]
    assert sorted(o["name"] for o in group["metadata"]["ownerReferences"]) == ["extra-0", "extra-1"]
    for name in ("extra-0", "extra-1"):
        assert running(cluster, name)["spec"]["nodeSelector"] == FLAVOR_SELECTOR
    reasons = get_json(cluster, "events", "-n", "research", "--field-selector", "involvedObject.name=extra-2")
    assert "ExcessPodDeleted" in {event["reason"] for event in reasons["items"]}


def test_a_jobs_pods_are_not_gated_and_a_cron_jobs_jobs_are_governed(cluster: Cluster) -> None:
    labels = {"kueue.x-k8s.io/queue-name": "research-queue"}
    template = gpu_pod("unused", 4, labels=labels)
    job_template = {
        "metadata": {"labels": labels},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "research", "labels": labels},
        "spec": {"schedule": "* * * * *", "jobTemplate": job_template, "concurrencyPolicy": "Forbid"},
    }
    try:
        created = cluster.kubectl("create", "-f", "-", input=json.dumps(cron))
        assert "does not manage" not in created.stderr  # its Jobs carry the label: they are queued

        def cron_job() -> dict[str, Any] | None:
            items = get_json(cluster, "jobs", "-n", "research")["items"]
            return next((j for j in items if j["metadata"]["name"].startswith("nightly-")), None)

        job = wait_until(cron_job, "the CronJob's first Job (the controller manager runs it each minute)", 90)
        assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
        workload_name = f"job-{job['metadata']['name']}-"
        governed = wait_until(
            lambda: next(
                (w for w in get_json(cluster, "workloads", "-n", "research")["items"]
                 if w["metadata"]["name"].startswith(workload_name) and condition_true(w, "Admitted")),
                None,
            ),
            "the CronJob's Job's Workload to be admitted",
            60,
        )  # fmt: skip
        assert governed["spec"]["queueName"] == "research-queue"

        def job_pod() -> dict[str, Any] | None:
            selector = f"batch.kubernetes.io/job-name={job['metadata']['name']}"
            items = get_json(cluster, "pods", "-n", "research", "-l", selector)["items"]
            return items[0] if items and items[0]["status"].get("phase") == "Running" else None

        started = wait_until(job_pod, "the Job's pod to run", 60)
        assert not started["spec"].get("schedulingGates")  # its Job is queued, not the pod
        assert "kueue.x-k8s.io/managed" not in started["metadata"].get("labels", {})
    finally:
        cluster.kubectl(
            "delete", "cronjob", "nightly", "-n", "research", "--cascade=foreground", "--wait=false", check=False
        )
        cluster.kubectl("delete", "jobs", "--all", "-n", "research", "--wait=false", check=False)


def test_a_labelled_object_of_a_kind_kuota_does_not_manage_is_admitted_with_a_warning(cluster: Cluster) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "research", "labels": {"kueue.x-k8s.io/queue-name": "research-queue"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "w", "image": "nginx"}]},
            },
        },
    }
    try:
        created = cluster.kubectl("create", "-f", "-", input=json.dumps(deployment))
        assert "kuota does not manage apps/v1 Deployment" in created.stderr
    finally:
        cluster.kubectl("delete", "deployment", "web", "-n", "research", check=False)


@pytest.fixture
def tas_queue(cluster: Cluster) -> Iterator[dict[str, str]]:
    """The fake nodes in racks r1 (two) and r2 (one), a Topology, a TAS flavor and a LocalQueue ``tas-queue`` on
    it in research; each node's rack."""
    first, second, third = cluster.node_names[:3]
    racks = {first: "r1", second: "r1", third: "r2"}
    for node, rack in racks.items():
        cluster.kubectl("label", "node", node, f"example.com/rack={rack}", "--overwrite")
    api = "kueue.x-k8s.io/v1beta2"
    levels = [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
    quotas = [{"name": "cpu", "nominalQuota": 100}, {"name": "nvidia.com/gpu", "nominalQuota": 48}]
    objects = [
        {"apiVersion": api, "kind": "Topology", "metadata": {"name": "pod-racks"}, "spec": {"levels": levels}},
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": "pod-tas"},
            "spec": {"nodeLabels": {"gpu-type": "h100"}, "topologyName": "pod-racks", "tolerations": [GPU_TOLERATION]},
        },
        {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": "pod-tas"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "nvidia.com/gpu"],
                        "flavors": [{"name": "pod-tas", "resources": quotas}],
                    }
                ],
            },
        },
        {
            "apiVersion": api,
            "kind": "LocalQueue",
            "metadata": {"name": "tas-queue", "namespace": "research"},
            "spec": {"clusterQueue": "pod-tas"},
        },
    ]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    try:
        yield racks
    finally:
        cluster.kubectl("delete", "pods", "--all", "-n", "research", "--wait=false", check=False)
        wait_until(lambda: not get_json(cluster, "pods", "-n", "research")["items"], "research's pods to go", 60)
        for node in racks:
            cluster.kubectl("label", "node", node, "example.com/rack-", check=False)
        for kind, name in (("clusterqueue", "pod-tas"), ("resourceflavor", "pod-tas"), ("topology", "pod-racks")):
            cluster.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "localqueue", "tas-queue", "-n", "research", "--ignore-not-found")


def test_a_pod_group_requiring_one_rack_lands_in_one_rack(cluster: Cluster, tas_queue: dict[str, str]) -> None:
    for index in range(2):
        manifest = gpu_pod(f"gang-{index}", 8, group=("gang", 2))
        manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "tas-queue"
        manifest["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "example.com/rack"
        manifest["spec"]["tolerations"] = [GPU_TOLERATION]
        create(cluster, manifest)
    group = admitted(cluster, "gang")
    (assignment,) = group["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    placed = [running(cluster, f"gang-{index}") for index in range(2)]
    assert {tas_queue[p["spec"]["nodeName"]] for p in placed} == {"r1"}
    assert all(not p["spec"].get("schedulingGates") for p in placed)


def test_an_unannotated_pod_on_a_tas_only_queue_is_sent_to_its_host_by_implied_topology(
    cluster: Cluster, tas_queue: dict[str, str]
) -> None:
    # Kueue's implied TAS: every flavor of the pod's ClusterQueue is a TAS flavor, so the pod, gated by topology at
    # creation as Kueue's pod webhook gates every pod, is placed unconstrained and sent to its host.
    manifest = gpu_pod("implied", 8)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "tas-queue"
    manifest["spec"]["tolerations"] = [GPU_TOLERATION]
    created = create(cluster, manifest)
    assert {"name": "kueue.x-k8s.io/topology"} in created["spec"]["schedulingGates"]
    (assignment,) = admitted(cluster, single_workload_name(created))["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    started = running(cluster, "implied")
    assert not started["spec"].get("schedulingGates")
    assert started["spec"]["nodeSelector"]["kubernetes.io/hostname"] == started["spec"]["nodeName"]
    assert started["metadata"]["annotations"]["kueue.x-k8s.io/podset-unconstrained-topology"] == "true"
