"""Fixtures for the manager on the real control plane: a running ``kuota manager``, the guide's namespaces,
and a clean slate of queueing objects after every test."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster
from tests.manager_process import MANAGED_LABEL, ManagerProcess
from tests.waiting import wait_until

KUOTA_NAMESPACE = "kuota-system"
GUIDE_NAMESPACES = ("research", "applied-ml", "inference")


def get_json(cluster: Cluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def events_of(cluster: Cluster, namespace: str, kind: str, name: str) -> list[tuple[str, str, str]]:
    """The (type, reason, message) of every Event recorded on one object."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    items = get_json(cluster, "events", "-n", namespace, "--field-selector", selector)["items"]
    return [(e["type"], e["reason"], e["message"]) for e in items]


def wait_for_event(cluster: Cluster, namespace: str, kind: str, name: str, type_and_reason: tuple[str, str]) -> str:
    """Wait for an Event of this (type, reason) on the object; its message."""

    def recorded() -> str | None:
        found = [m for t, r, m in events_of(cluster, namespace, kind, name) if (t, r) == type_and_reason]
        return found[0] if found else None

    return wait_until(recorded, f"a {type_and_reason} Event on {kind} {namespace}/{name}", timeout=60)


def apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def ensure_namespace(cluster: Cluster, name: str, managed: bool = True) -> None:
    cluster.kubectl("create", "namespace", name, check=False)
    if managed:
        cluster.kubectl("label", "namespace", name, f"{MANAGED_LABEL}=true", "--overwrite")


@pytest.fixture(scope="module")
def manager(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[ManagerProcess]:
    del kuota_crds
    ensure_namespace(cluster, KUOTA_NAMESPACE, managed=False)
    running = ManagerProcess(cluster, KUOTA_NAMESPACE)
    running.start()
    try:
        yield running
    finally:
        running.stop()
        running.unregister()


@pytest.fixture(scope="module")
def guide_namespaces(cluster: Cluster) -> tuple[str, ...]:
    for name in GUIDE_NAMESPACES:
        ensure_namespace(cluster, name)
    return GUIDE_NAMESPACES


def _remaining_workloads(cluster: Cluster) -> list[str]:
    return [w["metadata"]["name"] for w in get_json(cluster, "workloads", "-A")["items"]]


def remove_queue_objects(cluster: Cluster, job_namespaces: Iterable[str]) -> None:
    """Jobs and Workloads gone, then the queues. Call it while a manager still runs: it releases the Workloads'
    finalizers. A pending Workload left behind would be admitted by the next test's manager."""
    for namespace in job_namespaces:
        cluster.kubectl("delete", "jobs", "--all", "-n", namespace, "--cascade=background", "--wait=false", check=False)
    cluster.kubectl("delete", "workloads", "--all", "-A", "--wait=false")
    wait_until(lambda: not _remaining_workloads(cluster), "every Workload to be deleted", timeout=60)
    cluster.kubectl(
        "delete", "clusterqueues,localqueues,resourceflavors,cohorts,workloadpriorityclasses", "--all", "-A"
    )


@pytest.fixture(autouse=True)
def clean_queue_objects(cluster: Cluster, manager: ManagerProcess) -> Iterator[None]:
    """After each test, nothing of it is left."""
    yield
    manager.ensure_started()
    remove_queue_objects(cluster, (*GUIDE_NAMESPACES, *_extra_namespaces(cluster)))


def _extra_namespaces(cluster: Cluster) -> list[str]:
    items = get_json(cluster, "namespaces", "-l", f"{MANAGED_LABEL}=true")["items"]
    return [n["metadata"]["name"] for n in items if n["metadata"]["name"] not in GUIDE_NAMESPACES]
