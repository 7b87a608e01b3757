"""kuota and Kueue v0.17.0 decide the same: the agreement scenario (benchmarks/side_by_side/agreement.py) on
live controllers, each on its own fresh control plane, against ``kuota simulate``'s replay of it: a flat
cohort, then a tree of nested cohorts (hierarchical reclaim, subtree pruning), then a JobSet, a RayJob and a
pod group competing with a standalone Workload (both controllers make those Workloads themselves, with the
JobSet, Ray and ``pod`` integrations enabled; the JobSet is preempted and admitted again). kuota follows Kueue v0.20;
the scenario stays where v0.17 decides the same (v0.17 still matches a pod set's nodeSelector against the
label keys of all a resource group's flavors, v0.19 against the flavor's own; v0.20 also lets a queue that may
preempt within itself simulate preemption past its nominal quota).

Then, on control planes of their own, the topology scenario: the three fake nodes labelled into two racks,
gangs that require or prefer a rack (or a node) arriving and finishing, each holder's pods per node decoded from
the controller's ``topologyAssignment`` (Kueue v0.17 writes v1beta2's compact form, as kuota).

The floor's snapshots are the hand-derived decisions (tests/unit/benchmarks/side_by_side/test_scenarios.py), so each
controller matching the floor means kuota and Kueue hold exactly the same workloads after every phase. Each
test starts its own control plane: Kueue's CRDs and kuota's may never share one, and the session's cluster
holds kuota's. Kueue comes from the binary cache; cold, it is built here first (about 11 minutes on two cores).
"""

from __future__ import annotations

import pytest

from benchmarks.side_by_side import agreement
from tests.cluster.binaries import ensure_kueue

pytestmark = pytest.mark.integration


def _assert_matches_floor(name: str, scenario: agreement.Scenario = agreement.DECISIONS) -> None:
    floor = agreement.floor_snapshots(scenario)
    live = agreement.run_live(name, scenario)
    comparisons = agreement.compare(scenario.phases, floor, live, live)
    assert all(c.agree for c in comparisons), f"{name} differs from the floor:\n" + agreement.render(comparisons)


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
def test_kueue_holds_the_floors_workloads_after_every_phase() -> None:
    ensure_kueue()
    _assert_matches_floor("Kueue")


def test_kuota_holds_the_floors_workloads_after_every_phase() -> None:
    _assert_matches_floor("kuota")


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
def test_kueue_holds_and_places_the_floors_gangs_after_every_phase() -> None:
    ensure_kueue()
    _assert_matches_floor("Kueue", agreement.TOPOLOGY)


def test_kuota_holds_and_places_the_floors_gangs_after_every_phase() -> None:
    _assert_matches_floor("kuota", agreement.TOPOLOGY)
