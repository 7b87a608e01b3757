"""``kuota simulate --nodes``: topology-aware decisions replayed on a node inventory, so that waiting caused by
fragmentation shows apart from waiting for quota, and one more rack shows what it changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kuota.cli import main

CONFIG = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: racks}
spec:
  levels: [{nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec: {nodeLabels: {pool: gpu}, topologyName: racks}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 64}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: team}
spec: {clusterQueue: team}
"""


def _pools(racks: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {
            "name": f"rack-{rack}",
            "count": count,
            "labels": {"pool": "gpu", "example.com/rack": rack},
            "allocatable": {"nvidia.com/gpu": "8", "pods": "110"},
        }
        for rack, count in racks.items()
    ]


def _gang(name: str, at: float, pods: int) -> dict[str, Any]:
    pod_set = {
        "name": "main",
        "count": pods,
        "requests": {"nvidia.com/gpu": "8"},
        "topologyRequest": {"required": "example.com/rack"},
    }
    return {"name": name, "namespace": "team", "queue": "q", "submitAt": at, "duration": 3600, "podSets": [pod_set]}


def _simulate(tmp_path: Path, racks: dict[str, int]) -> dict[str, Any]:
    tmp_path.mkdir()
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "nodes.json").write_text(json.dumps(_pools(racks)))
    lines = [_gang("a", 0, 2), _gang("b", 1, 2), _gang("c", 2, 1)]
    (tmp_path / "workloads.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.json"
    arguments = ["--config", str(tmp_path / "config.yaml"), "--workloads", str(tmp_path / "workloads.jsonl")]
    assert main(["simulate", *arguments, "--nodes", str(tmp_path / "nodes.json"), "--output", str(out)]) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def test_a_rack_gang_waits_for_a_rack_though_quota_fits_and_one_more_rack_admits_it(tmp_path: Path) -> None:
    waited = {w["name"]: w for w in _simulate(tmp_path / "two", {"a": 2, "b": 1})["workloads"]}
    assert [admission["at"] for admission in waited["b"]["admissions"]] == [3600.0]
    assert waited["c"]["admissions"][0]["at"] == 2.0
    more = {w["name"]: w for w in _simulate(tmp_path / "three", {"a": 2, "b": 1, "c": 2})["workloads"]}
    assert more["b"]["admissions"][0]["at"] == 1.0


def test_a_kubectl_node_dump_is_an_inventory(tmp_path: Path) -> None:
    nodes = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "metadata": {
                    "name": name,
                    "labels": {"pool": "gpu", "example.com/rack": "a", "kubernetes.io/hostname": name},
                },
                "status": {
                    "allocatable": {"nvidia.com/gpu": "8", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
            for name in ("n1", "n2")
        ],
    }
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    (tmp_path / "workloads.jsonl").write_text(json.dumps(_gang("a", 0, 2)) + "\n")
    out = tmp_path / "out.json"
    arguments = ["--config", str(tmp_path / "config.yaml"), "--workloads", str(tmp_path / "workloads.jsonl")]
    assert main(["simulate", *arguments, "--nodes", str(tmp_path / "nodes.json"), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["workloads"][0]["admissions"][0]["at"] == 0.0


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        ([{"name": "r", "count": 2}], "allocatable must name the resources of each node"),
        ([{"name": "r", "allocatable": {"nvidia.com/gpu": "eight"}}], "allocatable nvidia.com/gpu"),
        ([{"name": "r", "racks": 2, "allocatable": {"pods": "1"}}], "unknown key(s) racks"),
    ],
)
def test_a_bad_inventory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pools: list[dict[str, Any]], message: str
) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "nodes.json").write_text(json.dumps(pools))
    (tmp_path / "workloads.jsonl").write_text(json.dumps(_gang("a", 0, 1)) + "\n")
    arguments = ["--config", str(tmp_path / "config.yaml"), "--workloads", str(tmp_path / "workloads.jsonl")]
    assert main(["simulate", *arguments, "--nodes", str(tmp_path / "nodes.json")]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert error.count("\n") == 1


def _leader_and_worker(name: str, at: float, group: str | None) -> dict[str, Any]:
    request: dict[str, Any] = {"required": "example.com/rack"}
    if group is not None:
        request["podSetGroupName"] = group
    pod_sets = [
        {"name": role, "count": 1, "requests": {"nvidia.com/gpu": "8"}, "topologyRequest": request}
        for role in ("leader", "worker")
    ]
    return {"name": name, "namespace": "team", "queue": "q", "submitAt": at, "duration": 3600, "podSets": pod_sets}


def _replay(tmp_path: Path, lines: list[dict[str, Any]], racks: dict[str, int]) -> int:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "nodes.json").write_text(json.dumps(_pools(racks)))
    (tmp_path / "workloads.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    arguments = ["--config", str(tmp_path / "config.yaml"), "--workloads", str(tmp_path / "workloads.jsonl")]
    return main(["simulate", *arguments, "--nodes", str(tmp_path / "nodes.json"), "--output", str(tmp_path / "o")])


def test_a_pod_set_group_must_share_its_rack_where_its_pod_sets_apart_would_split(tmp_path: Path) -> None:
    # Two racks of one 8-GPU node: the leader and the worker of a group need one rack for both and never fit; the
    # same two pod sets without a group each take a rack.
    lines = [_leader_and_worker("grouped", 0, "llm"), _leader_and_worker("apart", 1, None)]
    assert _replay(tmp_path, lines, {"a": 1, "b": 1}) == 0
    replayed = {w["name"]: w for w in json.loads((tmp_path / "o").read_text())["workloads"]}
    assert replayed["grouped"]["admissions"] == []
    assert [admission["at"] for admission in replayed["apart"]["admissions"]] == [1.0]


def test_a_group_of_pod_sets_asking_different_levels_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _leader_and_worker("split", 0, "llm")
    line["podSets"][1]["topologyRequest"] = {"preferred": "example.com/rack", "podSetGroupName": "llm"}
    assert _replay(tmp_path, [line], {"a": 1}) == 2
    error = capsys.readouterr().err
    assert 'pod set group "llm": both pod sets must ask for the same required or preferred level' in error
    assert error.count("\n") == 1
