"""Small builders for engine scenarios: decoded API objects and workloads, with Kueue's defaults."""

from __future__ import annotations

from typing import Any

from kuota.engine.decoding import parse_object
from kuota.engine.model import Configuration, PodSet, Toleration, Workload
from kuota.engine.quantities import parse_quantity
from kuota.engine.quota_engine import Admission, Decision, Eviction, QuotaEngine

API = "kueue.x-k8s.io/v1beta2"


def flavor(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    tolerations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def quota(
    name: str, nominal: int | str, borrowing: int | str | None = None, lending: int | str | None = None
) -> dict[str, Any]:
    result: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        result["borrowingLimit"] = borrowing
    if lending is not None:
        result["lendingLimit"] = lending
    return result


def cluster_queue(
    name: str, flavors: dict[str, list[dict[str, Any]]], *, cohort: str | None = None, **spec: Any
) -> dict[str, Any]:
    covered = [q["name"] for q in next(iter(flavors.values()))]
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": covered, "flavors": [{"name": f, "resources": r} for f, r in flavors.items()]}
        ],
    }
    if cohort is not None:
        body["cohortName"] = cohort
    body.update(spec)
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def local_queue(namespace: str, cluster_queue_name: str, name: str = "q") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def gpu_queue(
    name: str,
    nominal: int,
    *,
    cohort: str | None = "pool",
    borrowing: int | None = None,
    lending: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return cluster_queue(name, {"gpu": [quota("nvidia.com/gpu", nominal, borrowing, lending)]}, cohort=cohort, **spec)


def engine_with(*objects: dict[str, Any], configuration: Configuration | None = None) -> QuotaEngine:
    """An engine holding ``objects``, with a flavor ``gpu`` and a LocalQueue ``q`` per ClusterQueue namespace."""
    engine = QuotaEngine(configuration)
    kinds = {obj["kind"] for obj in objects}
    if "ResourceFlavor" not in kinds:
        engine.apply(parse_object(flavor("gpu")))
    for obj in objects:
        engine.apply(parse_object(obj))
        if obj["kind"] == "ClusterQueue" and "LocalQueue" not in kinds:
            engine.apply(parse_object(local_queue(obj["metadata"]["name"], obj["metadata"]["name"])))
    return engine


def workload(
    namespace: str,
    name: str,
    gpus: int = 1,
    *,
    at: float = 0.0,
    priority: int = 0,
    count: int = 1,
    min_count: int | None = None,
    queue: str = "q",
    requests: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    max_seconds: int | None = None,
    pod_sets: tuple[PodSet, ...] | None = None,
) -> Workload:
    per_pod = (
        {"nvidia.com/gpu": gpus}
        if requests is None
        else {resource: parse_quantity(resource, text) for resource, text in requests.items()}
    )
    sets = pod_sets or (PodSet("main", count, per_pod, min_count, selector or {}, tolerations),)
    return Workload(
        namespace,
        name,
        queue,
        sets,
        created=at,
        uid=f"{at:012.3f}-{name}",
        priority=priority,
        max_execution_seconds=max_seconds,
    )


def admitted(decisions: list[Decision]) -> list[str]:
    return [d.workload for d in decisions if isinstance(d, Admission)]


def evicted(decisions: list[Decision]) -> list[str]:
    return [d.workload for d in decisions if isinstance(d, Eviction)]
