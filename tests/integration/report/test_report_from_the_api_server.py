"""``kuota report --kubeconfig`` on the real control plane: retained Workloads and the live queues, read with
nothing but the chart's report RBAC, give the history-derived figures they were built to give; a forbidden
or unreachable API server stops the report with a clear message.

Known values, by construction (the Workloads' conditions are written through the status subresource):

- namespace ``<ns>`` submits to ClusterQueue ``<ns>-train`` (8 GPUs, cohort ``<ns>-cohort``, borrowingLimit 0)
  two 8-GPU Workloads that each ran exactly one hour and succeeded; ``<ns>-lend`` (8 GPUs, same cohort) is
  idle. Replayed: today the second waits for the first, W = 3600 s less the seconds between their
  creations; with borrowing it takes ``<ns>-lend``'s GPUs at once (0 s); with 8 more GPUs shared over every
  ClusterQueue ``<ns>-train`` gets at most 3, still short of 16, so W again.
- namespace ``<ns>-b`` submits to ``<ns>-batch`` (8 GPUs, its own cohort) a Workload of 2 pods x 2 GPUs that
  ran 90 minutes and failed: 6 GPU-hours burned; and one never admitted (left out, and said so).

Other tests' objects may share the cluster, so the checks are per team, never cluster totals.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.report.sources.api_listing import api_source, read_cluster
from kuota.report.sources.queue_config import namespace_queues
from kuota.report.sources.workload_history import job_history
from tests.cluster import Cluster
from tests.integration.report.conftest import ReportRun, run_report
from tests.prometheus_server import PrometheusServer
from tests.unit.chart.rendering import render
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
WINDOW_S = 7 * 86400
RAN_S = 3600
FAILED_RAN_S = 5400


@dataclass(frozen=True)
class LiveHistory:
    namespace: str
    batch_namespace: str
    created: dict[str, float]  # Workload name -> its creationTimestamp (set by the API server)
    end: int  # the report window's end: after every Workload finished

    @property
    def train(self) -> str:
        return f"{self.namespace}-train"

    @property
    def batch(self) -> str:
        return f"{self.namespace}-batch"

    @property
    def queueing_wait_s(self) -> float:
        return RAN_S - abs(self.created["train-1"] - self.created["train-2"])

    @property
    def window_start(self) -> int:
        return self.end - WINDOW_S


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quota(name: str, flavor: str, cohort: str, **limits: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": flavor, "resources": [{"name": GPU, "nominalQuota": 8, **limits}]}],
                }
            ],
        },
    }


def _workload(name: str, namespace: str, pods: int, gpus: int) -> dict[str, Any]:
    container = {"name": "main", "image": "trainer", "resources": {"requests": {GPU: str(gpus)}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "default",
            "podSets": [
                {"name": "main", "count": pods, "template": {"spec": {"containers": [container]}}},
            ],
        },
    }


def _condition(kind: str, reason: str, at: float) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": f"{kind} for the report test",
        "lastTransitionTime": _iso(at),
    }


def _finish(
    cluster: Cluster, workload: dict[str, Any], cluster_queue: str, flavor: str, *, ran_s: int, outcome: str
) -> None:
    """Admit ``workload`` a minute after its creation and finish it ``ran_s`` later, as kuota would record it."""
    metadata = workload["metadata"]
    created = datetime.fromisoformat(metadata["creationTimestamp"].replace("Z", "+00:00")).timestamp()
    pod_set = workload["spec"]["podSets"][0]
    gpus = pod_set["count"] * int(pod_set["template"]["spec"]["containers"][0]["resources"]["requests"][GPU])
    status = {
        "admission": {
            "clusterQueue": cluster_queue,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {GPU: flavor},
                    "resourceUsage": {GPU: str(gpus)},
                    "count": pod_set["count"],
                },
            ],
        },
        "conditions": [
            _condition("QuotaReserved", "QuotaReserved", created + 60),
            _condition("Admitted", "Admitted", created + 60),
            _condition("Finished", outcome, created + 60 + ran_s),
        ],
    }
    cluster.kubectl(
        "patch",
        "workloads.kueue.x-k8s.io",
        metadata["name"],
        "-n",
        metadata["namespace"],
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _apply(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


@pytest.fixture(scope="module")
def live_history(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[LiveHistory]:
    del kuota_crds
    namespace = f"r-{uuid.uuid4().hex[:8]}"
    batch_namespace = f"{namespace}-b"
    flavor = f"{namespace}-gpu"
    cluster_scoped = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}},
        _quota(f"{namespace}-train", flavor, f"{namespace}-cohort", borrowingLimit=0),
        _quota(f"{namespace}-lend", flavor, f"{namespace}-cohort"),
        _quota(f"{namespace}-batch", flavor, f"{namespace}-solo"),
    ]
    try:
        _apply(
            cluster,
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in (namespace, batch_namespace)],
        )
        _apply(
            cluster,
            cluster_scoped
            + [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "default", "namespace": ns},
                    "spec": {"clusterQueue": cq},
                }
                for ns, cq in ((namespace, f"{namespace}-train"), (batch_namespace, f"{namespace}-batch"))
            ],
        )
        _apply(
            cluster,
            [
                _workload("train-1", namespace, 1, 8),
                _workload("train-2", namespace, 1, 8),
                _workload("crashed", batch_namespace, 2, 2),
                _workload("waiting", batch_namespace, 1, 1),
            ],
        )
        listed = {
            w["metadata"]["name"]: w
            for ns in (namespace, batch_namespace)
            for w in json.loads(cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-n", ns, "-o", "json").stdout)[
                "items"
            ]
        }
        _finish(cluster, listed["train-1"], f"{namespace}-train", flavor, ran_s=RAN_S, outcome="Succeeded")
        _finish(cluster, listed["train-2"], f"{namespace}-train", flavor, ran_s=RAN_S, outcome="Succeeded")
        _finish(cluster, listed["crashed"], f"{namespace}-batch", flavor, ran_s=FAILED_RAN_S, outcome="Failed")
        created = {
            name: datetime.fromisoformat(w["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()
            for name, w in listed.items()
        }
        # a whole hour a little after the last finish, so no run is cut by the window's end
        end = int(max(created.values()) + 60 + FAILED_RAN_S) // 3600 * 3600 + 7200
        yield LiveHistory(namespace, batch_namespace, created, end)
    finally:
        for obj in cluster_scoped:
            cluster.kubectl(
                "delete",
                f"{obj['kind'].lower()}s.kueue.x-k8s.io",
                obj["metadata"]["name"],
                "--ignore-not-found",
                "--wait=false",
                check=False,
            )
        for ns in (namespace, batch_namespace):
            cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def no_metrics_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """The report needs a Prometheus; these figures come from the API server alone."""
    with PrometheusServer.start(tmp_path_factory.mktemp("empty-prometheus")) as server:
        yield server


def _chart_report_identity(cluster: Cluster, name: str) -> Path:
    """A kubeconfig for a user granted exactly the chart's report ClusterRole (renamed for this test)."""
    role = render({"report": {"enabled": True, "prometheusUrl": "http://p:9090"}}).one("ClusterRole", "kuota-report")
    role["metadata"] = {"name": name}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
    }
    _apply(cluster, [role, binding])
    wait_until(
        lambda: (
            cluster.kubectl("auth", "can-i", "list", "cohorts.kueue.x-k8s.io", "--as", name, check=False).stdout.strip()
            == "yes"
        ),
        f"the ClusterRole {name} to be in effect",
    )
    return cluster.kubeconfig_for(name, groups=())


@pytest.fixture(scope="module")
def live_report(
    cluster: Cluster,
    live_history: LiveHistory,
    no_metrics_prometheus: PrometheusServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ReportRun]:
    name = f"{live_history.namespace}-report"
    try:
        kubeconfig = _chart_report_identity(cluster, name)
        yield run_report(
            "--prometheus",
            no_metrics_prometheus.url,
            "--kubeconfig",
            str(kubeconfig),
            "--end",
            str(live_history.end),
            "--window",
            "7d",
            out=tmp_path_factory.mktemp("live-report") / "out",
        )
    finally:
        for kind in ("clusterrolebinding", "clusterrole"):
            cluster.kubectl("delete", kind, name, "--ignore-not-found", check=False)


def _team(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(team for team in report["teams"] if team["name"] == name)
    return found


def test_the_report_runs_with_only_the_charts_report_rbac(live_report: ReportRun) -> None:
    assert live_report.exit_code == 0, live_report.stderr
    assert any(
        "listing Workloads and queue objects from the API server" in line for line in live_report.stderr.splitlines()
    )


def test_failed_gpu_hours_come_from_the_retained_workloads(live_report: ReportRun, live_history: LiveHistory) -> None:
    report = live_report.json()
    batch = _team(report, live_history.batch)
    assert batch["namespaces"] == [live_history.batch_namespace]
    assert batch["failed_gpu_hours"] == pytest.approx(2 * 2 * FAILED_RAN_S / 3600)
    assert _team(report, live_history.train)["failed_gpu_hours"] == 0.0
    assert any("never admitted (no known duration)" in note for note in report["notes"])


def test_the_whatif_replays_the_live_queues_and_history(live_report: ReportRun, live_history: LiveHistory) -> None:
    scenarios = {s["name"]: s["per_queue_wait_p95_s"] for s in live_report.json()["whatif"]}
    assert list(scenarios) == ["current", "borrowing", "+8 GPUs"]
    # two waits, 0 and the queueing one: the p95 interpolates between them, as every wait p95 of the report does
    p95 = 0.95 * live_history.queueing_wait_s
    assert scenarios["current"][live_history.train] == pytest.approx(p95)
    assert scenarios["borrowing"][live_history.train] == pytest.approx(0.0)
    assert scenarios["+8 GPUs"][live_history.train] == pytest.approx(p95)
    for name in scenarios:
        assert scenarios[name][live_history.batch] == pytest.approx(0.0)


async def test_whatif_inputs_are_the_workloads_as_simulate_records(cluster: Cluster, live_history: LiveHistory) -> None:
    listed = await read_cluster(api_source(cluster.kubeconfig), with_queues=True, page_size=1)
    history = job_history(listed.workloads, live_history.window_start, live_history.end)
    ours = {
        (r["namespace"], r["name"]): r
        for r in history.records
        if r["namespace"] in (live_history.namespace, live_history.batch_namespace)
    }

    def record(namespace: str, name: str, pods: int, gpus: int, ran_s: int) -> dict[str, Any]:
        return {
            "name": name,
            "namespace": namespace,
            "queue": "default",
            "priorityClass": None,
            "submitAt": live_history.created[name] - live_history.window_start,
            "duration": float(ran_s),
            "maxExecutionSeconds": None,
            "podSets": [
                {"name": "main", "count": pods, "requests": {GPU: str(gpus)}, "nodeSelector": {}, "tolerations": []}
            ],
        }

    assert ours == {
        (live_history.namespace, "train-1"): record(live_history.namespace, "train-1", 1, 8, RAN_S),
        (live_history.namespace, "train-2"): record(live_history.namespace, "train-2", 1, 8, RAN_S),
        (live_history.batch_namespace, "crashed"): record(live_history.batch_namespace, "crashed", 2, 2, FAILED_RAN_S),
    }
    assert history.failed_gpu_hours[live_history.batch_namespace] == pytest.approx(6.0)
    assert listed.config_objects is not None
    queues = namespace_queues(listed.config_objects)
    assert queues[live_history.namespace] == live_history.train
    assert queues[live_history.batch_namespace] == live_history.batch
    train = next(
        o for o in listed.config_objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == live_history.train
    )
    assert train["spec"]["cohortName"] == f"{live_history.namespace}-cohort"
    assert train["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] == 0


def test_a_forbidden_identity_gets_a_clear_error_and_exit_5(cluster: Cluster, tmp_path: Path) -> None:
    nobody = cluster.kubeconfig_for(f"nobody-{uuid.uuid4().hex[:8]}", groups=())
    run = run_report("--prometheus", "http://127.0.0.1:1", "--kubeconfig", str(nobody), out=tmp_path / "out")
    assert run.exit_code == 5, run.stderr
    assert "HTTP 403" in run.stderr
    assert f"grant the identity of --kubeconfig {nobody} get and list on" in run.stderr
    assert "Prometheus" not in run.stderr, "the API server is asked first, so its error is the one shown"


def test_an_unreachable_api_server_gets_a_clear_error_and_exit_5(cluster: Cluster, tmp_path: Path) -> None:
    document = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    document["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(yaml.safe_dump(document), encoding="utf-8")
    run = run_report("--prometheus", "http://127.0.0.1:1", "--kubeconfig", str(unreachable), out=tmp_path / "out")
    assert run.exit_code == 5, run.stderr
    assert "the API server at https://127.0.0.1:1 did not answer a list of" in run.stderr
    assert f"check the server in --kubeconfig {unreachable}" in run.stderr


def test_a_kubectl_dump_of_the_same_workloads_gives_the_same_history(
    cluster: Cluster,
    live_report: ReportRun,
    live_history: LiveHistory,
    no_metrics_prometheus: PrometheusServer,
    tmp_path: Path,
) -> None:
    """The --workloads reader against kubectl's own output (a List of the API server's Workloads), not against a
    dump the tests made up: with the same queues, it must read what the live listing reads."""
    dump = tmp_path / "workloads.json"
    dump.write_text(cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-A", "-o", "json").stdout)
    queues = []
    for kind in ("resourceflavors", "clusterqueues", "localqueues", "cohorts"):
        for item in json.loads(cluster.kubectl("get", f"{kind}.kueue.x-k8s.io", "-A", "-o", "json").stdout)["items"]:
            metadata = {key: item["metadata"][key] for key in ("name", "namespace") if key in item["metadata"]}
            queues.append(
                {"apiVersion": item["apiVersion"], "kind": item["kind"], "metadata": metadata, "spec": item["spec"]}
            )
    config = tmp_path / "queues.yaml"
    config.write_text(yaml.safe_dump_all(queues))
    from_dump = run_report(
        "--prometheus", no_metrics_prometheus.url, "--workloads", str(dump), "--config", str(config),
        "--end", str(live_history.end), "--window", "7d", out=tmp_path / "out",
    )  # fmt: skip
    assert from_dump.exit_code == 0, from_dump.stderr
    live, dumped = live_report.json(), from_dump.json()
    for team in (live_history.train, live_history.batch):
        assert _team(dumped, team)["failed_gpu_hours"] == _team(live, team)["failed_gpu_hours"]
    assert dumped["whatif"] == live["whatif"]
