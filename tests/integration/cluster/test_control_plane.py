"""The harness is real: the Job controller, the scheduler and the fake GPU nodes behave like a cluster."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster import GPU_RESOURCE, RUN_SECONDS_ANNOTATION, Cluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]


def _gpu_job(name: str, namespace: str, tolerate_gpu_taint: bool) -> dict[str, Any]:
    tolerations = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}] if tolerate_gpu_taint else []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: "2"}},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": tolerations,
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "example.invalid/trainer:1.0",
                            "resources": {
                                "requests": {"cpu": "16", "memory": "128Gi", GPU_RESOURCE: "4"},
                                "limits": {GPU_RESOURCE: "4"},
                            },
                        }
                    ],
                },
            },
        },
    }


def _get(cluster: Cluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_gpu_job_runs_to_completion_on_fake_gpu_nodes(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_gpu_job("train", namespace, tolerate_gpu_taint=True)))

    def bound_pods() -> list[dict[str, Any]] | None:
        pods = _get(cluster, "pods", "-n", namespace, "-l", "job-name=train")["items"]
        return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_until(bound_pods, "both pods of the Job bound to nodes", timeout=60)
    assert {p["spec"]["nodeName"] for p in pods} <= set(cluster.node_names)
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["requests"][GPU_RESOURCE] == "4"

    def complete() -> bool:
        conditions = _get(cluster, "job", "train", "-n", namespace)["status"].get("conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    wait_until(complete, "the Job to become Complete", timeout=60)
    job = _get(cluster, "job", "train", "-n", namespace)
    assert job["status"]["succeeded"] == 2
    phases = [p["status"]["phase"] for p in _get(cluster, "pods", "-n", namespace, "-l", "job-name=train")["items"]]
    assert phases == ["Succeeded", "Succeeded"]


def test_pod_without_gpu_toleration_is_not_bound(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(_gpu_job("untolerated", namespace, tolerate_gpu_taint=False))
    )

    def unschedulable_pods() -> list[dict[str, Any]] | None:
        pods = _get(cluster, "pods", "-n", namespace, "-l", "job-name=untolerated")["items"]
        reasons = [
            c.get("reason")
            for p in pods
            for c in p.get("status", {}).get("conditions", [])
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ]
        return pods if len(pods) == 2 and reasons == ["Unschedulable", "Unschedulable"] else None

    pods = wait_until(unschedulable_pods, "the scheduler to report both pods Unschedulable", timeout=60)
    assert all(not p["spec"].get("nodeName") for p in pods)
    messages = " ".join(
        c.get("message", "") for p in pods for c in p["status"]["conditions"] if c["type"] == "PodScheduled"
    )
    assert "untolerated taint" in messages


def test_fake_nodes_advertise_gpus_labels_and_taints(cluster: Cluster) -> None:
    nodes = _get(cluster, "nodes", "-l", "gpu-type=h100")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["h100-0", "h100-1", "h100-2"]
    for node in nodes:
        assert node["status"]["allocatable"][GPU_RESOURCE] == "8"
        assert node["metadata"]["labels"]["capacity-type"] == "on-demand"
        assert {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]


def _port_is_free(url: str) -> bool:
    port = int(url.rsplit(":", 1)[1])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As a new server would: connections left in TIME_WAIT do not hold the port, a listener does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _exited(pid: int) -> bool:
    """Gone, or a zombie waiting for a reaper that this container may not have."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return status.rsplit(")", 1)[1].split()[0] == "Z"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.cluster", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_shell_entry_starts_and_tears_down_cleanly_twice(tmp_path: Path) -> None:
    for attempt in ("first", "second"):
        workdir = tmp_path / attempt
        up = _cli("up", "--workdir", str(workdir))
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"export KUBECONFIG={workdir / 'admin.kubeconfig'}"
        state = json.loads((workdir / "processes.json").read_text())
        pids = list(state["pids"].values())
        assert len(pids) == 5
        running = Cluster.attach(workdir)
        assert running.kubectl("get", "nodes", "-o", "name").stdout.split() == [
            "node/h100-0",
            "node/h100-1",
            "node/h100-2",
        ]
        down = _cli("down", "--workdir", str(workdir))
        assert down.returncode == 0, down.stderr
        for pid in pids:
            wait_until(lambda pid=pid: _exited(pid), f"process {pid} to exit", timeout=15)
        assert _port_is_free(state["server"])
        assert _port_is_free(state["etcd_url"])
        assert not (workdir / "processes.json").exists()


def test_suspending_a_running_job_removes_its_pods_as_a_kubelet_would(cluster: Cluster, namespace: str) -> None:
    job = _gpu_job("long", namespace, tolerate_gpu_taint=True)
    del job["spec"]["template"]["metadata"]["annotations"][RUN_SECONDS_ANNOTATION]  # runs until stopped
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))

    def running() -> bool:
        pods = _get(cluster, "pods", "-n", namespace, "-l", "job-name=long")["items"]
        return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)

    wait_until(running, "both pods to run", timeout=60)
    cluster.kubectl("patch", "job", "long", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_until(
        lambda: not _get(cluster, "pods", "-n", namespace, "-l", "job-name=long")["items"],
        "the suspended Job's pods to be gone (not left Terminating)",
        timeout=60,
    )
