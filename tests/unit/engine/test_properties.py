"""Properties over generated configs and workload streams.

- batched == sequential: one ``schedule`` call gives exactly the decisions of one-admission-at-a-time calls,
  and of a naive reference scheduler that rebuilds everything at every step;
- usage never exceeds any quota or limit at any instant (checked by replaying the decisions, one by one, on
  an independent quota tree);
- nothing is admitted twice;
- a preemption never evicts what the preemptor's policy protects;
- no preemption cycles: at no instant does a victim preempt its own preemptor back.

Besides the general streams: fair sharing where set-aside groups hold several workloads of one shape and
ties in share are broken by age.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.engine.decoding import parse_object
from kuota.engine.model import (
    ClusterQueue,
    Cohort,
    Configuration,
    FairSharing,
    PodSet,
    ReclaimPolicy,
    ResourceFlavor,
    WithinClusterQueuePolicy,
    Workload,
)
from kuota.engine.quota_engine import Admission, Decision, Eviction, QuotaEngine
from kuota.engine.quota_tree import QuotaTree
from tests.examples import examples

from .builders import API, cluster_queue, flavor, local_queue, quota
from .reference import ReferenceScheduler

FLAVORS = ("f1", "f2")


@st.composite
def queue_specs(draw: st.DrawFn, index: int) -> dict[str, Any]:
    # c2 and c3 are child cohorts of c1 (weights 1 and 2): two levels for the fair-sharing tournament.
    cohort = draw(st.sampled_from([None, "c0", "c0", "c1", "c2", "c3"]))
    two_flavors = draw(st.booleans())
    flavors: dict[str, list[dict[str, Any]]] = {}
    for name in FLAVORS[: 2 if two_flavors else 1]:
        nominal = draw(st.integers(0, 6))
        borrowing = draw(st.none() | st.integers(0, 6)) if cohort else None
        lending = draw(st.none() | st.integers(0, nominal)) if cohort else None
        flavors[name] = [quota("nvidia.com/gpu", nominal, borrowing, lending)]
    reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any"]))
    preemption: dict[str, Any] = {
        "withinClusterQueue": draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])),
        "reclaimWithinCohort": reclaim,
    }
    if reclaim != "Never" and draw(st.booleans()):
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": draw(st.integers(0, 3))}
    return cluster_queue(
        f"q{index}",
        flavors,
        cohort=cohort,
        preemption=preemption,
        queueingStrategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
        flavorFungibility={
            "whenCanBorrow": draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
            "whenCanPreempt": draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
        },
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool, list[tuple[Any, ...]]]:
    count = draw(st.integers(2, 4))
    queues = [draw(queue_specs(i)) for i in range(count)]
    fair = draw(st.booleans())
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(4, 28))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "finish", "tick"]))
        if kind == "submit":
            pods = draw(st.integers(1, 4))
            ops.append(
                (
                    "submit",
                    draw(st.integers(0, count - 1)),
                    draw(st.integers(1, 4)),
                    pods,
                    draw(st.none() | st.integers(1, pods)),
                    draw(st.integers(0, 3)),
                    draw(st.booleans()),
                )
            )
        elif kind == "finish":
            ops.append(("finish", draw(st.integers(0, 50))))
        else:
            ops.append(("tick",))
    return queues, fair, ops


@dataclass
class _World:
    objects: list[Any]
    configuration: Configuration

    def engine(self) -> QuotaEngine:
        engine = QuotaEngine(self.configuration)
        for obj in self.objects:
            engine.apply(obj)
        return engine

    def reference(self) -> ReferenceScheduler:
        return ReferenceScheduler(
            flavors={o.name: o for o in self.objects if isinstance(o, ResourceFlavor)},
            cluster_queues={o.name: o for o in self.objects if isinstance(o, ClusterQueue)},
            cohorts={o.name: o for o in self.objects if isinstance(o, Cohort)},
            configuration=self.configuration,
            queue_of={(o.name, "q"): o.name for o in self.objects if isinstance(o, ClusterQueue)},
        )

    def tree(self) -> QuotaTree:
        return QuotaTree(
            {o.name: o for o in self.objects if isinstance(o, ClusterQueue)},
            {o.name: o for o in self.objects if isinstance(o, Cohort)},
        )


def _child_cohort(name: str, weight: str) -> dict[str, Any]:
    spec = {"parentName": "c1", "fairSharing": {"weight": weight}}
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _world(queues: list[dict[str, Any]], fair: bool, cohorts: list[dict[str, Any]] | None = None) -> _World:
    raw = [flavor(name) for name in FLAVORS] + queues
    raw += [local_queue(q["metadata"]["name"], q["metadata"]["name"]) for q in queues]
    if cohorts is not None:
        raw += cohorts
    elif any(q["spec"].get("cohortName") in ("c2", "c3") for q in queues):
        raw += [_child_cohort("c2", "1"), _child_cohort("c3", "2")]
    return _World([parse_object(obj) for obj in raw], Configuration(fair_sharing=FairSharing() if fair else None))


def _comparable(decisions: list[Decision]) -> list[tuple[Any, ...]]:
    result: list[tuple[Any, ...]] = []
    for d in decisions:
        if isinstance(d, Admission):
            result.append(
                (
                    "admit",
                    d.workload,
                    d.cluster_queue,
                    tuple((p.name, p.count, tuple(sorted(p.flavors.items()))) for p in d.pod_sets),
                    d.borrowing,
                    d.preempted,
                )
            )
        else:
            result.append(("evict", d.workload, d.preempted_by, d.preemption_reason))
    return result


def _taken(admission: Admission) -> dict[tuple[str, str], int]:
    taken: dict[tuple[str, str], int] = {}
    for pod_set in admission.pod_sets:
        for resource, amount in pod_set.usage.items():
            fr = (pod_set.flavors[resource], resource)
            taken[fr] = taken.get(fr, 0) + amount
    return taken


class _Checker:
    """Replays decisions on an independent tree and checks the invariants at every single step."""

    def __init__(self, world: _World) -> None:
        self.world = world
        self.tree = world.tree()
        self.queues = {o.name: o for o in world.objects if isinstance(o, ClusterQueue)}
        self.running: dict[str, tuple[str, dict[tuple[str, str], int], Workload]] = {}
        self.workloads: dict[str, Workload] = {}

    def finish(self, key: str) -> None:
        if key in self.running:
            queue, usage, _ = self.running.pop(key)
            self.tree.add_usage(queue, usage, -1)

    def apply(self, decisions: list[Decision]) -> None:
        preempted: set[tuple[str, str]] = set()
        for index, d in enumerate(decisions):
            if isinstance(d, Eviction):
                assert d.workload in self.running, f"{d.workload} evicted but not running"
                queue, usage, victim = self.running[d.workload]
                if d.preempted_by is not None:
                    # A workload may be admitted, preempted and admitted again at one instant: a victim's
                    # preemptor is the preemptor's next admission.
                    admission = next(
                        a for a in decisions[index:] if isinstance(a, Admission) and a.workload == d.preempted_by
                    )
                    self._check_policy(
                        d.preempted_by, d.workload, queue, usage, victim, preemptor_usage=_taken(admission)
                    )
                    assert (d.workload, d.preempted_by) not in preempted, "preemption cycle"
                    preempted.add((d.preempted_by, d.workload))
                self.finish(d.workload)
                continue
            assert isinstance(d, Admission)
            assert d.workload not in self.running, f"{d.workload} admitted twice"
            taken = _taken(d)
            self.tree.add_usage(d.cluster_queue, taken, 1)
            self.running[d.workload] = (d.cluster_queue, taken, self.workloads[d.workload])
            for name, node in self.tree.cluster_queues.items():
                for fr in node.subtree:
                    assert self.tree.available(node, fr) >= 0, f"{name} over its limits on {fr}"

    def _check_policy(
        self,
        preemptor_key: str,
        victim_key: str,
        victim_queue: str,
        usage: dict[tuple[str, str], int],
        victim: Workload,
        *,
        preemptor_usage: dict[tuple[str, str], int],
    ) -> None:
        preemptor = self.workloads[preemptor_key]
        own_queue = preemptor.namespace  # each namespace's LocalQueue points at the ClusterQueue of its name
        policy = self.queues[own_queue].preemption
        if victim_queue == own_queue:
            allowed = victim.priority < preemptor.priority or (
                policy.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                and victim.priority == preemptor.priority
                and (victim.created, victim.uid) > (preemptor.created, preemptor.uid)
            )
            assert policy.within_cluster_queue is not WithinClusterQueuePolicy.NEVER and allowed, (
                f"{preemptor_key} evicted protected {victim_key} in its own queue"
            )
            return
        assert policy.reclaim_within_cohort is not ReclaimPolicy.NEVER, f"{preemptor_key} may not reclaim"
        if policy.reclaim_within_cohort is ReclaimPolicy.LOWER_PRIORITY:
            assert victim.priority < preemptor.priority, f"{preemptor_key} evicted equal/higher {victim_key}"
        # Kueue's rule: the victim's queue borrows some flavor and resource the preemptor needs, and the victim
        # uses one of them.
        node = self.tree.cluster_queues[victim_queue]
        assert any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in preemptor_usage), (
            f"{victim_key} evicted from {victim_queue}, which was not borrowing what {preemptor_key} needs"
        )
        assert set(usage) & set(preemptor_usage), f"{victim_key} uses nothing {preemptor_key} needs"


def _run(
    queues: list[dict[str, Any]], fair: bool, ops: list[tuple[Any, ...]], cohorts: list[dict[str, Any]] | None = None
) -> None:
    world = _world(queues, fair, cohorts)
    batched, sequential, reference = world.engine(), world.engine(), world.reference()
    checker = _Checker(world)
    submitted = 0
    for step, op in enumerate(ops):
        now = float(step)
        if op[0] == "submit":
            _, index, gpus, pods, min_count, priority, same_time, *extra = op
            name = f"q{index}"
            requests = {"nvidia.com/gpu": gpus}
            if extra and extra[0]:
                requests["cpu"] = extra[0] * 1000
            pod_sets = [PodSet("main", pods, requests, min_count)]
            if len(extra) > 1:  # a second pod set of the same shape: (count, minCount)
                pod_sets.append(PodSet("second", extra[1][0], requests, extra[1][1]))
            workload = Workload(
                name,
                f"w{submitted}",
                "q",
                tuple(pod_sets),
                created=0.0 if same_time else now,
                uid=f"{submitted:04d}",
                priority=priority,
            )
            submitted += 1
            checker.workloads[workload.key] = workload
            for target in (batched, sequential, reference):
                target.submit(workload)
        elif op[0] == "finish" and checker.running:
            key = sorted(checker.running)[op[1] % len(checker.running)]
            checker.finish(key)
            for target in (batched, sequential, reference):
                target.finish(key)
        at_once = batched.schedule(now)
        one_by_one: list[Decision] = []
        while more := sequential.schedule(now, limit=1):
            assert sum(isinstance(d, Admission) for d in more) == 1
            one_by_one += more
        naive = reference.schedule(now)
        assert _comparable(at_once) == _comparable(one_by_one) == _comparable(naive)
        checker.apply(at_once)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_batched_equals_sequential_and_invariants_hold(scenario: tuple[list[dict[str, Any]], bool, list[Any]]) -> None:
    _run(*scenario)


@st.composite
def adversarial(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool, list[tuple[Any, ...]]]:
    """Two full queues that may preempt each other, flooded with equal- and mixed-priority work at one instant."""
    policy = {
        "withinClusterQueue": draw(st.sampled_from(["LowerPriority", "LowerOrNewerEqualPriority"])),
        "reclaimWithinCohort": "Any",
    }
    queues = [
        cluster_queue(f"q{i}", {"f1": [quota("nvidia.com/gpu", 4)]}, cohort="c0", preemption=policy) for i in range(2)
    ]
    ops: list[tuple[Any, ...]] = [
        ("submit", draw(st.integers(0, 1)), draw(st.integers(1, 4)), 1, None, draw(st.integers(0, 1)), True)
        for _ in range(draw(st.integers(4, 16)))
    ]
    return queues, draw(st.booleans()), ops


@settings(max_examples=examples(60), deadline=None)
@given(adversarial())
def test_no_preemption_cycles_under_adversarial_streams(scenario: tuple[list[dict[str, Any]], bool, list[Any]]) -> None:
    _run(*scenario)


@st.composite
def two_resource_scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool, list[tuple[Any, ...]]]:
    """GPUs and cpu in one resource group: a head may wait for one, the other or both, and a need past nominal
    quota may keep a queue that cannot preempt past it from preempting until it is available."""
    count = draw(st.integers(2, 3))
    queues = []
    for index in range(count):
        cohort = draw(st.sampled_from([None, "c0", "c0"]))
        flavors: dict[str, list[dict[str, Any]]] = {}
        for name in FLAVORS[: draw(st.integers(1, 2))]:
            flavors[name] = [
                quota(
                    resource,
                    draw(st.integers(0, 4)),
                    draw(st.none() | st.integers(0, 4)) if cohort else None,
                    None,
                )
                for resource in ("nvidia.com/gpu", "cpu")
            ]
        queues.append(
            cluster_queue(
                f"q{index}",
                flavors,
                cohort=cohort,
                preemption={
                    "withinClusterQueue": draw(st.sampled_from(["Never", "LowerPriority"])),
                    "reclaimWithinCohort": draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
                },
                flavorFungibility={
                    "whenCanBorrow": draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
                    "whenCanPreempt": draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
                },
            )
        )
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(4, 28))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "finish", "finish", "tick"]))
        if kind == "submit":
            ops.append(
                (
                    "submit",
                    draw(st.integers(0, count - 1)),
                    draw(st.integers(1, 3)),
                    1,
                    None,
                    draw(st.integers(0, 2)),
                    draw(st.booleans()),
                    draw(st.integers(0, 4)),
                )
            )
        elif kind == "finish":
            ops.append(("finish", draw(st.integers(0, 50))))
        else:
            ops.append(("tick",))
    return queues, draw(st.booleans()), ops


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(two_resource_scenarios())
def test_batched_equals_sequential_with_two_resources(
    scenario: tuple[list[dict[str, Any]], bool, list[Any]],
) -> None:
    _run(*scenario)


# A nested tree: top, with left and right below it, and deep below left; any of them may own quota.
NESTED_COHORTS = (("top", None), ("left", "top"), ("right", "top"), ("deep", "left"))


@st.composite
def nested_scenarios(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], bool, list[tuple[Any, ...]], list[dict[str, Any]]]:
    """Nested cohorts with quota at cohort levels, queues at every level: hierarchical reclaim, subtree pruning
    and the borrowing levels of the flavor walk."""
    cohorts: list[dict[str, Any]] = []
    for name, parent in NESTED_COHORTS:
        spec: dict[str, Any] = {}
        if parent is not None:
            spec["parentName"] = parent
        owned = {f: draw(st.integers(0, 3)) for f in FLAVORS if draw(st.booleans())}
        if owned:
            spec["resourceGroups"] = [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": f, "resources": [quota("nvidia.com/gpu", n)]} for f, n in owned.items()],
                }
            ]
        cohorts.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    count = draw(st.integers(2, 4))
    queues = []
    for index in range(count):
        queue = draw(queue_specs(index))
        queue["spec"]["cohortName"] = draw(st.sampled_from([name for name, _ in NESTED_COHORTS]))
        queues.append(queue)
    _, fair, ops = draw(scenarios())
    ops = [op if op[0] != "submit" else (op[0], op[1] % count, *op[2:]) for op in ops]
    return queues, fair, ops, cohorts


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nested_scenarios())
def test_batched_equals_sequential_in_nested_cohorts_with_quota_at_cohort_levels(
    scenario: tuple[list[dict[str, Any]], bool, list[Any], list[dict[str, Any]]],
) -> None:
    _run(*scenario)


@st.composite
def fair_ties(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool, list[tuple[Any, ...]]]:
    """Fair sharing in one cohort, two shapes and small quotas: set-aside groups hold several workloads of one
    shape, and queues tie in share (the tie goes to the older workload)."""
    queues = [
        cluster_queue(
            f"q{i}",
            {"f1": [quota("nvidia.com/gpu", draw(st.integers(0, 2)))]},
            cohort="c0",
            preemption={"reclaimWithinCohort": draw(st.sampled_from(["Never", "Any"]))},
        )
        for i in range(2)
    ]
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(4, 24))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "submit", "finish", "tick"]))
        if kind == "submit":
            ops.append(("submit", draw(st.integers(0, 1)), draw(st.integers(1, 2)), 1, None, 0, False))
        elif kind == "finish":
            ops.append(("finish", draw(st.integers(0, 50))))
        else:
            ops.append(("tick",))
    return queues, True, ops


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fair_ties())
def test_batched_equals_sequential_when_fair_sharing_breaks_ties_in_set_aside_groups(
    scenario: tuple[list[dict[str, Any]], bool, list[Any]],
) -> None:
    _run(*scenario)


@st.composite
def two_pod_set_scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool, list[tuple[Any, ...]]]:
    """Workloads of two pod sets, either or both cut toward a minCount: the reducer probes each pod set's
    count in Kueue's order, and whatever it settles on must keep every invariant."""
    count = draw(st.integers(2, 4))
    queues = [draw(queue_specs(i)) for i in range(count)]
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(4, 28))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "finish", "tick"]))
        if kind == "submit":
            pods, second = draw(st.integers(1, 4)), draw(st.integers(1, 4))
            ops.append(
                (
                    "submit",
                    draw(st.integers(0, count - 1)),
                    draw(st.integers(1, 2)),
                    pods,
                    draw(st.none() | st.integers(1, pods)),
                    draw(st.integers(0, 3)),
                    draw(st.booleans()),
                    0,
                    (second, draw(st.none() | st.integers(1, second))),
                )
            )
        elif kind == "finish":
            ops.append(("finish", draw(st.integers(0, 50))))
        else:
            ops.append(("tick",))
    return queues, draw(st.booleans()), ops


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(two_pod_set_scenarios())
def test_batched_equals_sequential_and_invariants_hold_with_two_pod_sets_cut_toward_min_count(
    scenario: tuple[list[dict[str, Any]], bool, list[Any]],
) -> None:
    _run(*scenario)
