"""The guide's objects, verbatim from tests/data/guide, and the two other teams "made the same way"."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.paths import GUIDE

FLAVOR = "resourceflavor-h100-ondemand.yaml"
RESEARCH_QUEUE = "clusterqueue-research.yaml"
RESEARCH_LOCAL_QUEUE = "localqueue-research.yaml"
PRIORITY_CLASS = "workloadpriorityclass-production-finetune.yaml"
FINETUNE_JOB = "job-llm-finetune.yaml"
VERBATIM = (FLAVOR, RESEARCH_QUEUE, RESEARCH_LOCAL_QUEUE, PRIORITY_CLASS)


def guide(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((GUIDE / name).read_text())
    return document


def team_queues(team: str, gpus: int, lending_limit: int | None = None) -> list[dict[str, Any]]:
    """A team's ClusterQueue and LocalQueue shaped like research's: same preemption, own namespace and limits."""
    queue = copy.deepcopy(guide(RESEARCH_QUEUE))
    queue["metadata"]["name"] = team
    queue["spec"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] = team
    for resource in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if resource["name"] == "nvidia.com/gpu":
            resource["nominalQuota"] = gpus
            resource.pop("borrowingLimit", None)
            if lending_limit is not None:
                resource["lendingLimit"] = lending_limit
    local = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"namespace": team, "name": f"{team}-queue"},
        "spec": {"clusterQueue": team},
    }
    return [queue, local]


def gpu_job(
    name: str, namespace: str, pods: int, gpus_per_pod: int, priority_class: str | None = None
) -> dict[str, Any]:
    """A Job shaped like the guide's fine-tune, in ``namespace``'s queue."""
    job = copy.deepcopy(guide(FINETUNE_JOB))
    metadata = job["metadata"]
    metadata.pop("generateName")
    metadata.update(name=name, namespace=namespace)
    metadata["labels"]["kueue.x-k8s.io/queue-name"] = f"{namespace}-queue"
    if priority_class is not None:
        metadata["labels"]["kueue.x-k8s.io/priority-class"] = priority_class
    job["spec"].update(parallelism=pods, completions=pods)
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = gpus_per_pod
    resources["limits"]["nvidia.com/gpu"] = gpus_per_pod
    return job
