"""The chart's two manager replicas, each its image in a network namespace of its own (podman's bridge network)
as two pods are, electing a leader with the chart's leader-election arguments. Both serve the webhook behind the
chart's Service (an EndpointSlice listing both addresses); the Lease's holder admits, and when it stops the
other takes the Lease and admits the next Job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.pod_container import PodContainer, host_address
from tests.cluster.tcp_relay import TcpRelay
from tests.integration.images.conftest import config_map_folder, identity, rbac_denials, route_services_to_host
from tests.integration.images.conftest import service_account as service_account_folder
from tests.integration.manager.conftest import ensure_namespace
from tests.integration.manager.guide_objects import FINETUNE_JOB, VERBATIM
from tests.integration.manager.test_guide import admitted_workload
from tests.paths import GUIDE
from tests.unit.chart.rendering import NAMESPACE, Rendered, pod_spec
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

# The name the API server's certificate holds for its in-cluster Service, as a pod's KUBERNETES_SERVICE_HOST.
API_SERVER_NAME = "kubernetes.default.svc"


def _arg(container: dict[str, Any], flag: str) -> str:
    (value,) = [str(arg).split("=", 1)[1] for arg in container["args"] if str(arg).startswith(f"{flag}=")]
    return value


def _holder(cluster: Cluster, lease: str) -> str | None:
    found = cluster.kubectl("get", "lease", lease, "-n", NAMESPACE, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    holder = json.loads(found.stdout)["spec"].get("holderIdentity")
    return str(holder) if holder else None


@pytest.fixture
def replicas(cluster: Cluster, chart: Rendered, tmp_path: Path) -> Iterator[dict[str, PodContainer]]:
    deployment = chart.one("Deployment")
    spec = pod_spec(deployment)
    container = spec["containers"][0]
    names = [f"kuota-manager-replica-{index}" for index in range(deployment["spec"]["replicas"])]
    assert len(names) == 2, "the chart's default replicas"
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    started: dict[str, PodContainer] = {}
    with TcpRelay(host_address(), (host, int(port))) as api_server:
        try:
            for name in names:
                # The Pod its identity names: the leader labels it for the visibility Service.
                stand_in = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {
                        "nodeSelector": {"kuota.test/no-such-node": "true"},
                        "containers": [{"name": "manager", "image": container["image"]}],
                    },
                }
                cluster.kubectl("apply", "-f", "-", input=json.dumps(stand_in))
                workdir = tmp_path / name
                volumes = {"config": config_map_folder(chart, spec["volumes"][0]["configMap"]["name"], workdir / "c")}
                started[name] = PodContainer.start(
                    spec,
                    "manager",
                    identity=replace(
                        identity(cluster, name), api_server_host=API_SERVER_NAME, api_server_port=api_server.port
                    ),
                    workdir=workdir,
                    volumes=volumes,
                    service_account=service_account_folder(cluster, "kuota-manager", workdir / "account"),
                    network="bridge",
                    hosts={API_SERVER_NAME: host_address()},
                )
            for name, replica in started.items():
                wait_until(partial(_settled, replica), f"{name}'s readiness", timeout=120)
                assert replica.ready(), replica.logs()
            route_services_to_host(cluster, chart, "manager", container, [r.address for r in started.values()])
            yield started
        finally:
            for name, replica in started.items():
                kept = tmp_path / f"{name}.log"
                if not kept.exists():  # the test keeps the log of a replica it stops
                    kept.write_text(replica.logs())
                replica.stop()
            cluster.kubectl("delete", "pods", *names, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")


def _one_of(cluster: Cluster, lease: str, names: set[str]) -> str | None:
    holder = _holder(cluster, lease)
    return holder if holder in names else None


def _settled(replica: PodContainer) -> bool:
    return replica.ready() or replica.exited()


def _admit_the_guides_job(cluster: Cluster) -> str:
    created = json.loads(cluster.kubectl("create", "-f", str(GUIDE / FINETUNE_JOB), "-o", "json").stdout)
    assert created["spec"]["suspend"] is True, "the chart's Service did not bring the Job to a replica's webhook"
    admitted_workload(cluster, "research", created["metadata"]["uid"])
    return str(created["metadata"]["name"])


def test_two_replicas_elect_one_leader_and_the_other_takes_over_when_it_stops(
    cluster: Cluster, chart: Rendered, replicas: dict[str, PodContainer], tmp_path: Path
) -> None:
    lease = _arg(pod_spec(chart.one("Deployment"))["containers"][0], "--lease-name")
    leader: str = wait_until(partial(_one_of, cluster, lease, set(replicas)), "a replica to hold the Lease")
    (follower,) = set(replicas) - {leader}
    ensure_namespace(cluster, "research")
    try:
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        first = _admit_the_guides_job(cluster)
        leader_log = replicas[leader].logs()
        (tmp_path / f"{leader}.log").write_text(leader_log)
        replicas[leader].stop()
        # As the EndpointSlice controller drops a deleted pod: the webhook is reached at the follower only.
        manager = pod_spec(chart.one("Deployment"))["containers"][0]
        route_services_to_host(cluster, chart, "manager", manager, [replicas[follower].address])
        wait_until(lambda: _holder(cluster, lease) == follower, f"{follower} to take the Lease", timeout=60)
        # The guide's quota holds one such Job: the new leader frees the first one's and admits the next.
        cluster.kubectl("delete", "job", first, "-n", "research", "--wait=false")
        _admit_the_guides_job(cluster)
    except AssertionError as failure:
        denied = "\n".join(rbac_denials(leader_log + replicas[follower].logs())) or "none"
        raise AssertionError(f"{failure}\nthe replicas' RBAC denials:\n{denied}") from failure
    finally:
        cluster.kubectl("delete", "jobs", "--all", "-n", "research", "--wait=false")
        wait_until(
            lambda: not json.loads(cluster.kubectl("get", "workloads", "-n", "research", "-o", "json").stdout)["items"],
            "the guide's Workloads to be released by the manager",
        )
        cluster.kubectl("delete", "clusterqueues,localqueues,resourceflavors,workloadpriorityclasses", "--all", "-A")
    assert not rbac_denials(leader_log + "\n" + replicas[follower].logs())
