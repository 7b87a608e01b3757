"""What a manager process costs: CPU seconds and peak RSS from /proc, and the requests it sent the API server.

Requests are counted by the API server itself: each manager authenticates as its own user in the group
:data:`MANAGER_GROUP`, a FlowSchema matches that user (exempt priority level, so nothing is throttled or
queued), and ``apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}`` counts every request it
dispatched for that schema, watches included. The parsing functions are pure; the readers do the I/O.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from benchmarks.side_by_side.errors import MeasureError

MANAGER_GROUP = "kuota-bench:managers"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds_from_stat(stat: str, clock_ticks: int = _CLOCK_TICKS) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (fields 14 and 15, after the parenthesised name)."""
    _, _, rest = stat.rpartition(")")
    fields = rest.split()
    if len(fields) < 13:
        raise MeasureError(f"/proc stat line too short to hold utime and stime: {stat[:80]!r}")
    return (int(fields[11]) + int(fields[12])) / clock_ticks


def peak_rss_mib_from_status(status: str) -> float:
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise MeasureError("no VmHWM line in /proc/<pid>/status: is the process a zombie already?")


def read_cpu_seconds(pid: int) -> float:
    return cpu_seconds_from_stat(Path(f"/proc/{pid}/stat").read_text())


def read_peak_rss_mib(pid: int) -> float:
    return peak_rss_mib_from_status(Path(f"/proc/{pid}/status").read_text())


def dispatched_requests(metrics_text: str, flow_schema: str) -> int:
    """The sum over priority levels of ``apiserver_flowcontrol_dispatched_requests_total`` for one schema."""
    pattern = re.compile(
        r'^apiserver_flowcontrol_dispatched_requests_total\{[^}]*flow_schema="' + re.escape(flow_schema) + r'"[^}]*\}'
        r"\s+(\S+)$",
        re.MULTILINE,
    )
    return sum(int(float(value)) for value in pattern.findall(metrics_text))


_REQUEST_LINE = re.compile(r"^apiserver_request_total\{([^}]*)\}\s+(\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def requests_by_kind(metrics_text: str) -> dict[str, int]:
    """``apiserver_request_total`` summed per "VERB resource[/subresource]" (every client): the API server
    does not label it by user, so this says where the traffic went, not who sent it."""
    totals: dict[str, int] = {}
    for labels_text, value in _REQUEST_LINE.findall(metrics_text):
        labels = dict(_LABEL.findall(labels_text))
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += f"/{labels['subresource']}"
        kind = f"{labels.get('verb', '?')} {resource or labels.get('component', '?')}"
        totals[kind] = totals.get(kind, 0) + int(float(value))
    return totals


def busiest(before: dict[str, int], after: dict[str, int], count: int) -> list[tuple[str, int]]:
    """The ``count`` kinds of request that grew most between two readings."""
    grown = {kind: after[kind] - before.get(kind, 0) for kind in after}
    return sorted(((k, n) for k, n in grown.items() if n > 0), key=lambda item: (-item[1], item[0]))[:count]


# The verbs that change an object: what the manager's writes are counted by.
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def flow_schema_name(user: str) -> str:
    return f"bench-{user}"


def writes_flow_schema_name(user: str) -> str:
    return f"bench-{user}-writes"


def manager_identity_objects(user: str) -> list[dict[str, Any]]:
    """The FlowSchemas that count ``user``'s writes (``WRITE_VERBS``) and its other requests, and the binding
    that makes the group cluster-admin."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "bench-managers-cluster-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": MANAGER_GROUP}],
    }
    every = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": True}
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": flow_schema_name(user)},
        "spec": {
            # Precedence 1 is reserved for 'exempt'; the manager is not in system:masters, so nothing lower wins.
            "matchingPrecedence": 50,
            "priorityLevelConfiguration": {"name": "exempt"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [every],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    writes = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": writes_flow_schema_name(user)},
        "spec": {
            # Matched before the schema above (lower precedence wins), so each request counts in one of them.
            "matchingPrecedence": 49,
            "priorityLevelConfiguration": {"name": "exempt"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [{**every, "verbs": list(WRITE_VERBS)}],
                }
            ],
        },
    }
    return [binding, writes, schema]
