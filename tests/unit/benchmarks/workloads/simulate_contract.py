"""A strict check of the simulate contract's workload record (docs/simulate.md), for the tests only.

It says what is wrong with a record instead of parsing it, so a failing test names the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

WORKLOAD_KEYS = {
    "name",
    "namespace",
    "queue",
    "priorityClass",
    "submitAt",
    "duration",
    "maxExecutionSeconds",
    "podSets",
}
POD_SET_KEYS = {"name", "count", "requests", "nodeSelector", "tolerations"}
TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def record_problems(record: object) -> list[str]:
    """Everything about one record that a strict contract reader would reject."""
    if not isinstance(record, dict):
        return [f"record is a {type(record).__name__}, not an object"]
    problems: list[str] = []
    if set(record) != WORKLOAD_KEYS:
        problems.append(f"keys {sorted(record)} are not exactly {sorted(WORKLOAD_KEYS)}")
        return problems
    if not (isinstance(record["name"], str) and len(record["name"]) <= 253 and DNS_SUBDOMAIN.match(record["name"])):
        problems.append(f"name {record['name']!r} is not a DNS subdomain")
    for key in ("namespace", "queue"):
        value = record[key]
        if not (isinstance(value, str) and len(value) <= 63 and DNS_LABEL.match(value)):
            problems.append(f"{key} {value!r} is not a DNS label")
    if record["priorityClass"] is not None and not (
        isinstance(record["priorityClass"], str) and DNS_SUBDOMAIN.match(record["priorityClass"])
    ):
        problems.append(f"priorityClass {record['priorityClass']!r} is neither null nor a name")
    if not (_number(record["submitAt"]) and record["submitAt"] >= 0):
        problems.append(f"submitAt {record['submitAt']!r} is not a number >= 0")
    if not (_number(record["duration"]) and record["duration"] > 0):
        problems.append(f"duration {record['duration']!r} is not a number > 0")
    limit = record["maxExecutionSeconds"]
    if limit is not None and not (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1):
        problems.append(f"maxExecutionSeconds {limit!r} is neither null nor an integer >= 1")
    problems += _pod_set_problems(record["podSets"])
    if json.loads(json.dumps(record)) != record:
        problems.append("record does not survive a JSON round trip")
    return problems


def _pod_set_problems(pod_sets: object) -> list[str]:
    if not (isinstance(pod_sets, list) and 1 <= len(pod_sets) <= 8):
        return [f"podSets {pod_sets!r} is not a list of 1 to 8 pod sets"]
    problems: list[str] = []
    names: set[str] = set()
    for index, pod_set in enumerate(pod_sets):
        where = f"podSets[{index}]"
        if not (isinstance(pod_set, dict) and set(pod_set) == POD_SET_KEYS):
            problems.append(f"{where} keys are not exactly {sorted(POD_SET_KEYS)}")
            continue
        if not (isinstance(pod_set["name"], str) and DNS_LABEL.match(pod_set["name"])):
            problems.append(f"{where}.name {pod_set['name']!r} is not a DNS label")
        elif pod_set["name"] in names:
            problems.append(f"{where}.name {pod_set['name']!r} repeats")
        else:
            names.add(pod_set["name"])
        count = pod_set["count"]
        if not (isinstance(count, int) and not isinstance(count, bool) and count >= 1):
            problems.append(f"{where}.count {count!r} is not an integer >= 1")
        requests = pod_set["requests"]
        if not (isinstance(requests, dict) and requests):
            problems.append(f"{where}.requests is not a non-empty object")
        else:
            for resource, quantity in requests.items():
                if not (isinstance(quantity, str) and QUANTITY.match(quantity)):
                    problems.append(f"{where}.requests[{resource}] {quantity!r} is not a quantity string")
        selector = pod_set["nodeSelector"]
        if not (isinstance(selector, dict) and all(isinstance(v, str) for v in selector.values())):
            problems.append(f"{where}.nodeSelector is not an object of strings")
        tolerations = pod_set["tolerations"]
        if not (
            isinstance(tolerations, list)
            and all(isinstance(t, dict) and set(t) <= TOLERATION_KEYS for t in tolerations)
        ):
            problems.append(f"{where}.tolerations is not a list of tolerations")
    return problems


def stream_problems(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Record problems plus the stream's: names unique per namespace, submitAt never decreasing."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    last = 0.0
    for index, record in enumerate(records):
        problems += [f"record {index}: {problem}" for problem in record_problems(record)]
        key = (record["namespace"], record["name"])
        if key in seen:
            problems.append(f"record {index}: {key[0]}/{key[1]} repeats")
        seen.add(key)
        if record["submitAt"] < last:
            problems.append(f"record {index}: submitAt {record['submitAt']} goes back before {last}")
        last = record["submitAt"]
    return problems


def reference_problems(objects: Sequence[Mapping[str, Any]], records: Iterable[Mapping[str, Any]]) -> list[str]:
    """What the workloads name that the config lacks, and config objects naming what does not exist."""
    kinds: dict[str, set[str]] = {}
    local_queues: dict[tuple[str, str], str] = {}
    for obj in objects:
        name = obj["metadata"]["name"]
        kinds.setdefault(obj["kind"], set()).add(name)
        if obj["kind"] == "LocalQueue":
            local_queues[(obj["metadata"]["namespace"], name)] = obj["spec"]["clusterQueue"]
    problems: list[str] = []
    for (namespace, name), cluster_queue in local_queues.items():
        if cluster_queue not in kinds.get("ClusterQueue", set()):
            problems.append(f"LocalQueue {namespace}/{name} points to missing ClusterQueue {cluster_queue}")
    for obj in objects:
        if obj["kind"] == "ClusterQueue":
            for group in obj["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    if flavor["name"] not in kinds.get("ResourceFlavor", set()):
                        problems.append(f"ClusterQueue {obj['metadata']['name']}: no ResourceFlavor {flavor['name']}")
    for record in records:
        if (record["namespace"], record["queue"]) not in local_queues:
            problems.append(f"{record['namespace']}/{record['name']}: no LocalQueue {record['queue']}")
        priority_class = record["priorityClass"]
        if priority_class is not None and priority_class not in kinds.get("WorkloadPriorityClass", set()):
            problems.append(f"{record['namespace']}/{record['name']}: no WorkloadPriorityClass {priority_class}")
    return problems
