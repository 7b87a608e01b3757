"""The fake-node spec: the guide's cluster by default, extra pools on request, typos rejected."""

from __future__ import annotations

import pytest

from tests.cluster.nodes import DEFAULT_POOLS, GPU_RESOURCE, parse_pools


def test_default_is_three_tainted_8xh100_on_demand_nodes() -> None:
    names = [name for pool in DEFAULT_POOLS for name in pool.node_names()]
    assert names == ["h100-0", "h100-1", "h100-2"]
    node = DEFAULT_POOLS[0].node_manifest("h100-0")
    assert node["metadata"]["labels"]["gpu-type"] == "h100"
    assert node["metadata"]["labels"]["capacity-type"] == "on-demand"
    assert node["spec"]["taints"] == [{"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}]
    assert node["status"]["allocatable"] == {"cpu": "192", "memory": "2Ti", "pods": "110", GPU_RESOURCE: "8"}


def test_spec_adds_a_spot_pool_and_l4_nodes() -> None:
    pools = parse_pools(
        "- {name: h100-spot, count: 2, capacityType: spot}\n"
        "- {name: l4, count: 1, gpuType: l4, gpus: 4, cpu: '48', memory: 192Gi}\n"
    )
    assert [name for pool in pools for name in pool.node_names()] == ["h100-spot-0", "h100-spot-1", "l4-0"]
    l4 = pools[1].node_manifest("l4-0")
    assert l4["metadata"]["labels"]["gpu-type"] == "l4"
    assert l4["status"]["capacity"][GPU_RESOURCE] == "4"
    assert pools[0].node_manifest("h100-spot-0")["metadata"]["labels"]["capacity-type"] == "spot"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{name: x}", "expected a list of pools"),
        ("- {count: 2}", r"node spec \[0\]: expected a mapping with a name"),
        ("- {name: x, gpu: 4}", r"node spec \[0\]: unknown keys \['gpu'\]"),
    ],
)
def test_bad_specs_are_rejected_with_the_entry_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_pools(text)
