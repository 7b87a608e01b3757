"""Do kuota and Kueue decide the same? A small deterministic scenario, the set of workloads holding quota
after each phase, under both controllers and under ``kuota simulate``.

One cohort of three ClusterQueues (10 cpu nominal each, may borrow 10, ``reclaimWithinCohort: Any``,
``withinClusterQueue: LowerPriority``); every workload asks 5 or 10 cpu and has its own priority, so no
decision hangs on a creation-time tie or on which of two equal victims was admitted last. Workloads never
finish on their own: a phase creates some, or finishes one by hand, and the state is read once the
controller has gone quiet. What each phase exercises:

1. a borrows the whole cohort's idle quota (4 x 5 cpu in a, nominal 10);
2. b fills its nominal quota out of what a is not borrowing;
3. c, within its nominal quota, reclaims from the borrower a: the two lowest-priority victims;
4. b preempts inside its own queue (its new workload would borrow, so it may not reclaim);
5. c's workload finishes: two queues want the freed 10 cpu, both by borrowing (priority decides, across
   queues);
6. b's preemptor finishes: a borrows again, up to its limit.

Then a second, separate tree of nested cohorts (``reclaimWithinCohort: Any``, ``withinClusterQueue:
LowerPriority`` everywhere): Cohort nest at the root holds x (no quota) and two sub-cohorts, nest-team, which
owns 10 cpu and holds p (no quota of its own), and nest-side, which owns nothing and holds y and z (5 each):

7. x borrows nest-team's idle 10, y borrows z's idle 5 within nest-side: the tree is full;
8. p's request fits nest-team's quota, so p reclaims it from x; y borrows too, but nest-side uses no more
   than its own quota, so y's workloads, of lower priority than x's, are pruned, never victims (Kueue's
   hierarchical reclaim: collectCandidatesInSubtree);
9. z, within its nominal quota, reclaims from its sibling y inside nest-side (y's lower priority goes); p's
   sub-cohort, within its quota, is spared.

Each preemptor outranks its victims, so that the freed quota goes to it and not back to the victim in
Kueue's next cycle (the unit tests show reclaim in the hierarchy taking workloads of any priority).

Then a third tree, cohort kinds, where job kinds compete with a standalone Workload: ClusterQueues m and n
(10 cpu nominal each, may borrow 10, the flat cohort's preemption policy); the controllers make the JobSet's,
the RayJob's and the pod group's Workloads (:mod:`~benchmarks.side_by_side.kinds`), and the floor replays the
same pod sets:

10. a RayJob (10 cpu: head, two workers, submitter) and a JobSet (5 cpu: driver, two workers) in m: m borrows
    5 of n's idle quota;
11. a standalone Workload fills n's other 5: the cohort is full;
12. a pod group in n (5 cpu: a driver and two workers, two roles), within n's nominal quota, reclaims from the
    borrower m: the JobSet, m's lower priority, is evicted (suspended) and requeued, the RayJob is spared;
13. the standalone Workload finishes: the JobSet is admitted again, borrowing.

The scenario and the comparison are pure; :func:`run_live` drives a controller through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.side_by_side import kinds
from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.kinds import JOBSET, POD_GROUP, RAYJOB, WORKLOAD
from benchmarks.side_by_side.live_run import LiveRun, PlannedObject
from benchmarks.side_by_side.session import api_for, controller_on_fresh_cluster, measured
from benchmarks.workloads.manifests import (
    Manifest,
    ResourceQuota,
    cluster_queue,
    cohort,
    local_queue,
    namespace,
    resource_flavor,
    workload_manifest,
    workload_priority_class,
)
from kuota.simulator.config_reading import config_from_dicts
from kuota.simulator.lines import WorkloadLine
from kuota.simulator.queue_mapping import QueueTarget
from kuota.simulator.replay import Outcome, replay
from kuota.simulator.workload_reading import convert_lines

QUEUES = ("a", "b", "c")
COHORT = "agree"
# The nested tree: cohort -> parent (None: the root) and the cpu it owns; queue -> cohort and its nominal cpu.
NESTED_COHORTS = {"nest": (None, 0), "nest-team": ("nest", 10), "nest-side": ("nest", 0)}
NESTED_QUEUES = {"x": ("nest", 0), "p": ("nest-team", 0), "y": ("nest-side", 5), "z": ("nest-side", 5)}
KINDS_QUEUES = ("m", "n")
KINDS_COHORT = "kinds"
LOCAL_QUEUE = "queue"
# Simulated seconds between phases: any gap works, the replay has no latency.
PHASE_SPACING = 10.0
_QUIET_SECONDS = 3.0
_PHASE_DEADLINE = 120.0


@dataclass(frozen=True, slots=True)
class ScenarioWorkload:
    name: str
    queue: str
    cpu: int
    priority: int
    kind: str = WORKLOAD  # or a job kind of benchmarks.side_by_side.kinds, whose Workload the controller makes

    @property
    def key(self) -> str:
        return f"{namespace_of(self.queue)}/{self.name}"


@dataclass(frozen=True, slots=True)
class Phase:
    title: str
    create: tuple[ScenarioWorkload, ...] = ()
    finish: tuple[str, ...] = ()  # workload names


def namespace_of(queue: str) -> str:
    return f"agree-{queue}"


SCENARIO = (
    Phase(
        "a borrows the idle cohort",
        create=tuple(ScenarioWorkload(f"a-{i}", "a", 5, 10 + i) for i in range(4)),
    ),
    Phase(
        "b fills its nominal quota", create=(ScenarioWorkload("b-0", "b", 5, 100), ScenarioWorkload("b-1", "b", 5, 101))
    ),
    Phase("c reclaims from the borrower a", create=(ScenarioWorkload("c-0", "c", 10, 150),)),
    Phase("b preempts within its queue", create=(ScenarioWorkload("b-2", "b", 5, 200),)),
    Phase("c-0 finishes: a and b borrow by priority", finish=("c-0",)),
    Phase("b-2 finishes: a borrows up to its limit", finish=("b-2",)),
    Phase(
        "nested: x borrows nest-team's quota, y its sibling z's",
        create=(
            ScenarioWorkload("x-0", "x", 10, 310),
            ScenarioWorkload("y-0", "y", 5, 305),
            ScenarioWorkload("y-1", "y", 5, 306),
        ),
    ),
    Phase(
        "nested: p reclaims its sub-cohort's quota from x, y is pruned", create=(ScenarioWorkload("p-0", "p", 10, 320),)
    ),
    Phase("nested: z reclaims from its sibling y, p is spared", create=(ScenarioWorkload("z-0", "z", 5, 330),)),
    Phase(
        "kinds: a RayJob and a JobSet in m borrow n's idle quota",
        create=(ScenarioWorkload("rj-0", "m", 10, 410, RAYJOB), ScenarioWorkload("js-0", "m", 5, 405, JOBSET)),
    ),
    Phase("kinds: a standalone Workload fills n", create=(ScenarioWorkload("s-0", "n", 5, 400),)),
    Phase(
        "kinds: a pod group in n reclaims from the borrower m, the JobSet goes",
        create=(ScenarioWorkload("pg-0", "n", 5, 420, POD_GROUP),),
    ),
    Phase("kinds: s-0 finishes, the JobSet is admitted again", finish=("s-0",)),
)


def _workloads(scenario: Sequence[Phase]) -> list[ScenarioWorkload]:
    return [workload for phase in scenario for workload in phase.create]


def priority_class(priority: int) -> str:
    return f"p{priority}"


def _queue_objects(queue: str, cohort_name: str, quota: ResourceQuota) -> list[Manifest]:
    """A scenario queue's namespace, ClusterQueue (reclaiming from anyone, preempting lower priorities in the
    queue) and LocalQueue."""
    return [
        namespace(namespace_of(queue)),
        cluster_queue(
            f"cq-{queue}",
            cohort_name=cohort_name,
            flavor="rf",
            quotas=(quota,),
            namespace_selector={},
            reclaim_within_cohort="Any",
            within_cluster_queue="LowerPriority",
        ),
        local_queue(QueueTarget(namespace_of(queue), LOCAL_QUEUE), f"cq-{queue}"),
    ]


def scenario_objects(scenario: Sequence[Phase] = SCENARIO) -> list[Manifest]:
    objects: list[Manifest] = [resource_flavor("rf")]
    for priority in sorted({w.priority for w in _workloads(scenario)}):
        objects.append(workload_priority_class(priority_class(priority), priority, "agreement scenario"))
    for queue in QUEUES:
        objects += _queue_objects(queue, COHORT, ResourceQuota("cpu", 10, borrowing_limit=10))
    for name, (parent, owned) in NESTED_COHORTS.items():
        objects.append(cohort(name, parent=parent, flavor="rf", quotas=(ResourceQuota("cpu", owned),) if owned else ()))
    for queue, (parent, nominal) in NESTED_QUEUES.items():
        objects += _queue_objects(queue, parent, ResourceQuota("cpu", nominal))
    for queue in KINDS_QUEUES:
        objects += _queue_objects(queue, KINDS_COHORT, ResourceQuota("cpu", 10, borrowing_limit=10))
    return objects


def _line(workload: ScenarioWorkload, submit_at: float, duration: float) -> WorkloadLine:
    return {
        "name": workload.name,
        "namespace": namespace_of(workload.queue),
        "queue": LOCAL_QUEUE,
        "priorityClass": priority_class(workload.priority),
        "submitAt": submit_at,
        "duration": duration,
        "maxExecutionSeconds": None,
        "podSets": [
            {
                "name": shape.name,
                "count": shape.count,
                "requests": {"cpu": str(shape.cpu)},
                "nodeSelector": {},
                "tolerations": [],
            }
            for shape in kinds.pod_sets(workload.kind, workload.cpu)
        ],
    }


def _priorities(scenario: Sequence[Phase]) -> dict[str, int]:
    return {priority_class(w.priority): w.priority for w in _workloads(scenario)}


def floor_snapshots(scenario: Sequence[Phase] = SCENARIO) -> list[frozenset[str]]:
    """The holding set after each phase under ``kuota simulate``. A workload finished by hand in phase k gets
    the duration that ends it at phase k's instant, which holds only if it was admitted on arrival; checked."""
    created_at = {w.name: index * PHASE_SPACING for index, phase in enumerate(scenario) for w in phase.create}
    finished_at = {name: index * PHASE_SPACING for index, phase in enumerate(scenario) for name in phase.finish}
    lines = [
        (
            f"scenario workload {w.name}",
            _line(w, created_at[w.name], finished_at.get(w.name, 1e9) - created_at[w.name]),
        )
        for w in _workloads(scenario)
    ]
    objects = config_from_dicts(scenario_objects(scenario))
    snapshots = []
    for index in range(len(scenario)):
        arrivals = sorted(convert_lines(lines, _priorities(scenario)), key=lambda w: w.submit_at)
        result = replay(objects, arrivals, until=index * PHASE_SPACING + PHASE_SPACING / 2)
        for name, at in finished_at.items():
            if at > index * PHASE_SPACING:
                continue
            history = next(h for h in result.workloads.values() if h.name == name)
            if not history.admissions or history.admissions[0].at != created_at[name]:
                raise MeasureError(f"scenario: {name} was not admitted on arrival, so its duration is wrong")
        snapshots.append(frozenset(key for key, h in result.workloads.items() if h.outcome is Outcome.ADMITTED))
    return snapshots


@dataclass(frozen=True, slots=True)
class PhaseComparison:
    title: str
    floor: frozenset[str]
    kuota: frozenset[str]
    kueue: frozenset[str]

    @property
    def agree(self) -> bool:
        return self.floor == self.kuota == self.kueue

    def differences(self) -> list[str]:
        every = self.floor | self.kuota | self.kueue
        lines = []
        for key in sorted(every):
            holders = [
                name
                for name, held in (("floor", self.floor), ("kuota", self.kuota), ("Kueue", self.kueue))
                if key in held
            ]
            if len(holders) != 3:
                lines.append(f"{key} holds quota under {', '.join(holders) or 'none'} only")
        return lines


def compare(
    scenario: Sequence[Phase],
    floor: Sequence[frozenset[str]],
    kuota: Sequence[frozenset[str]],
    kueue: Sequence[frozenset[str]],
) -> list[PhaseComparison]:
    if not len(scenario) == len(floor) == len(kuota) == len(kueue):
        raise MeasureError("compare: one snapshot per phase for each of floor, kuota and Kueue")
    return [PhaseComparison(p.title, f, a, b) for p, f, a, b in zip(scenario, floor, kuota, kueue, strict=True)]


def render(comparisons: Sequence[PhaseComparison]) -> str:
    def names(keys: frozenset[str]) -> str:
        return " ".join(sorted(key.split("/", 1)[1] for key in keys))

    lines = []
    for index, comparison in enumerate(comparisons, start=1):
        verdict = "same" if comparison.agree else "DIFFERENT"
        lines.append(f"phase {index}: {comparison.title}: {verdict}")
        lines.append(f"    holding quota: {names(comparison.floor)}" if comparison.agree else "")
        for difference in comparison.differences():
            lines.append(f"    {difference}")
    return "\n".join(line for line in lines if line) + "\n"


def _manifest(workload: ScenarioWorkload, priorities: dict[str, int]) -> dict[str, Any]:
    """What is created for one scenario workload: the Workload itself, or the job the controller makes it of."""
    if workload.kind == WORKLOAD:
        return workload_manifest(_line(workload, 0.0, 0.0), priority_values=priorities)
    shape = (workload.name, namespace_of(workload.queue), LOCAL_QUEUE, priority_class(workload.priority), workload.cpu)
    if workload.kind == JOBSET:
        return kinds.jobset(*shape)
    if workload.kind == RAYJOB:
        return kinds.rayjob(*shape)
    if workload.kind == POD_GROUP:
        return {"apiVersion": "v1", "kind": "List", "items": kinds.pod_group(*shape)}
    raise MeasureError(f"scenario workload {workload.name}: unknown kind {workload.kind!r}")


def _plan(phase: Phase) -> list[PlannedObject]:
    priorities = _priorities(SCENARIO)
    return [
        PlannedObject(
            key=w.key,
            submit_at=0.0,
            workload_class="scenario",
            cpu=float(w.cpu),
            runtime=None,
            manifest=_manifest(w, priorities),
        )
        for w in phase.create
    ]


async def _play(live: LiveRun, scenario: Sequence[Phase]) -> list[frozenset[str]]:
    snapshots = []
    await live.open()
    try:
        for phase in scenario:
            began = live.clock()
            created = _plan(phase)
            await live.create_scheduled(created)
            for name in phase.finish:
                key = next(w.key for w in _workloads(scenario) if w.name == name)
                await live.finish(key)
            await _quiet(live, [p.key for p in created], began)
            snapshots.append(frozenset(live.holding()))
    finally:
        await live.close()
    return snapshots


async def _quiet(live: LiveRun, created: list[str], began: float) -> None:
    """Until the phase's own writes were seen (every new Workload, some change since ``began``), no executor
    write is in flight, and no Workload changed for a while."""
    deadline = live.clock() + _PHASE_DEADLINE
    while not (
        live.last_event_at > began
        and all(key in live.latest for key in created)
        and not live.busy
        and live.clock() - live.last_event_at >= _QUIET_SECONDS
    ):
        live.check_watch()
        if live.clock() > deadline:
            raise MeasureError(f"the controller never went quiet within {_PHASE_DEADLINE:.0f}s")
        await asyncio.sleep(0.1)


def run_live(name: str, scenario: Sequence[Phase] = SCENARIO, keep_under: Path | None = None) -> list[frozenset[str]]:
    """The holding set after each phase under controller ``name`` ("kuota" or "Kueue")."""
    all_plans = [planned for phase in scenario for planned in _plan(phase)]
    on_cluster = controller_on_fresh_cluster(name, scenario_objects(scenario), keep_under, kinds.FRAMEWORKS)
    with on_cluster as (cluster, controller):

        async def drive() -> list[frozenset[str]]:
            async with api_for(cluster) as api:
                return await _play(LiveRun(api, all_plans), scenario)

        return measured(cluster, controller, drive).outcome
