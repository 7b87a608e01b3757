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

A second scenario, :data:`CHECKS`, runs on its own clusters, as both controllers' Configuration turns
waitForPodsReady's timeout down to 20 s (which would time out the first scenario's standalone Workloads under
Kueue, whose PodsReady no job writes, and its JobSet and RayJob, whose pods no controller makes). Its workloads
are batch/v1 Jobs: ClusterQueue r (10 cpu) for the timeout, k (10 cpu) running AdmissionCheck gate, whose
controller (``kuota.test/by-hand``) neither controller runs: the scenario sets it Active and answers each
Workload's check by hand, writing ``status.admissionChecks`` as a check controller would.

1. stuck-0, a Job whose pod selects a node no node has, is admitted in r;
2. wait-0 (lower priority) waits behind it; after the timeout stuck-0 is evicted (PodsReadyTimeout) and backs
   off (600 s), and wait-0, whose pod runs, is admitted;
3. chk-0 and chk-1 (lower priority) in k: chk-0 reserves the quota, its check Pending;
4. chk-0's check answers Retry (no ``requeueAfterSeconds``): evicted, its quota freed, queued again at once, and
   it reserves again ahead of chk-1, its check Pending again;
5. chk-2 (lowest priority) arrives and chk-0's check answers Rejected: chk-0 is deactivated, chk-1 reserves;
6. chk-1's check answers Ready: it is admitted and its pod starts.

The Retry carries no delay because Kueue (v0.17, and v0.20's code alike) does not evict a Workload whose Retry
asks for one until the delay is over: its workload controller first copies ``requeueAfterSeconds`` into
``status.requeueState.requeueAt``, then waits for that instant ("Waiting for backoff to finish") before it looks
at the checks, so the quota stays reserved the whole delay; kuota evicts at once and requeues after the delay
(docs/architecture.md, "AdmissionChecks"). That difference, not a decision, is what a 3600 s Retry showed here.
The phases compare who holds quota, not words; Kueue v0.17 words the same decisions as v0.20 does (and kuota)
except: a Retry's ``Evicted`` message "At least one admission check is false" (v0.20: 'Evicted due to
AdmissionCheck in Retry state: "gate" (message)'); a Rejected check's ``DeactivationTarget``, ``Evicted``
(``DeactivatedDueToAdmissionCheck``) and ``Requeued`` message "The workload is deactivated due to Admission
check(s): gate, were rejected" (v0.20: '... due to AdmissionCheck in Rejected state: "gate" (message)') and its
Warning event "Deactivating workload because AdmissionCheck for gate was Rejected: message" (v0.20: "Deactivated
due to AdmissionCheck in Rejected state: ..."). Both count the evictions alike in ``schedulingStats``
(``AdmissionCheck``, then ``Deactivated`` with cause ``AdmissionCheck``).

The floor replays the timeout with ``podsReadyAfter`` null and each hand-written answer with the workload's
``admissionChecks`` (the seconds from each reservation to its answer, the Retries, a rejection): the answers of
one workload all come that many seconds after the reservation they answer.

A third scenario, :data:`TOPOLOGY`, runs topology-aware scheduling on its own clusters: the control plane's
three fake 8-GPU nodes labelled into racks (``kuota.test/rack``: r1 holds h100-0 and h100-1, r2 holds h100-2), a
Topology of racks and hosts, a TAS flavor on them and ClusterQueue t with more GPUs than the nodes have (and no
preemption), so only the topology refuses. Its workloads are standalone Workloads of one pod set whose
``topologyRequest`` requires or prefers a level; each phase compares the holders and, for each, its pods per
domain (node), decoded from each side's ``status.admission.podSetAssignments[].topologyAssignment``. Kueue v0.17
stores Workloads in v1beta2 (its storage version) and writes the compact form (``slices``), at the hostname level
only: read through v1beta2, byte for byte what kuota writes. Each holder is also read through v1beta1, which
each controller's conversion webhook serves in the older ``levels`` + ``domains`` form: decoded, it must place the
pods as the v1beta2 copy does. Every placement is forced (the only rack or node with
room), so no tie-break decides:

1. t-a (3 pods x 8 GPUs) prefers a rack; none holds it, so it spans both, a pod a node;
2. t-b (2 x 8) requires a rack; none has room, it waits;
3. t-a finishes: t-b takes r1, the only rack that holds it, and t-c (1 x 8, preferring a rack) h100-2;
4. t-b finishes: t-d (4 x 4, requiring a rack) takes r1, two pods a node;
5. t-c finishes: t-e (2 x 4, requiring one node) takes h100-2.

The floor replays it with the same nodes (``replay``'s ``nodes``, as ``kuota simulate --nodes``) and reads the
pods per domain from each admission's topology.

The scenarios and the comparison are pure; :func:`run_live` drives a controller through one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.side_by_side import kinds
from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.kinds import JOB, JOBSET, POD_GROUP, RAYJOB, WORKLOAD
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
from kuota.engine import TopologyAssignment, topology_node
from kuota.simulator.config_reading import config_from_dicts
from kuota.simulator.lines import PodSetLine, WorkloadLine
from kuota.simulator.queue_mapping import QueueTarget
from kuota.simulator.replay import Outcome, ReplayResult, WorkloadHistory, replay
from kuota.simulator.workload_reading import convert_lines
from kuota.webhook.topology_assignment import decode, decode_domains
from tests.cluster import GPU_RESOURCE
from tests.cluster.nodes import DEFAULT_POOLS

QUEUES = ("a", "b", "c")
COHORT = "agree"
# The nested tree: cohort -> parent (None: the root) and the cpu it owns; queue -> cohort and its nominal cpu.
NESTED_COHORTS = {"nest": (None, 0), "nest-team": ("nest", 10), "nest-side": ("nest", 0)}
NESTED_QUEUES = {"x": ("nest", 0), "p": ("nest-team", 0), "y": ("nest-side", 5), "z": ("nest-side", 5)}
KINDS_QUEUES = ("m", "n")
KINDS_COHORT = "kinds"
LOCAL_QUEUE = "queue"
CHECK = "gate"
CHECK_CONTROLLER = "kuota.test/by-hand"
PODS_READY_TIMEOUT = 20.0
CHECKS_CONFIGURATION: dict[str, Any] = {
    "waitForPodsReady": {"timeout": f"{PODS_READY_TIMEOUT:.0f}s", "requeuingStrategy": {"backoffBaseSeconds": 600}}
}
# A check's answer by hand, as the floor declares it on the workload's line (beside "after").
_ANSWERS: dict[str, dict[str, Any]] = {
    "Ready": {},
    "Retry": {"retries": 1},
    "Rejected": {"reject": True},
}
TAS_QUEUE = "t"
TOPOLOGY_NAME = "racks"
RACK = "kuota.test/rack"
HOSTNAME = "kubernetes.io/hostname"
# The fresh control plane's fake nodes (tests/cluster/nodes.py's default pool) by rack.
NODE_RACKS = {"h100-0": "r1", "h100-1": "r1", "h100-2": "r2"}
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
# Simulated seconds between phases: any gap works, the replay has no latency.
PHASE_SPACING = 10.0
_QUIET_SECONDS = 3.0
_PHASE_DEADLINE = 120.0


@dataclass(frozen=True, slots=True)
class Gang:
    """The one pod set of a Workload topology-aware scheduling places: ``pods`` pods of ``gpus`` GPUs each, which
    ``placement`` (a ``topologyRequest`` key: ``required`` or ``preferred``) one domain of ``level``."""

    pods: int
    gpus: int
    placement: str
    level: str


@dataclass(frozen=True, slots=True)
class ScenarioWorkload:
    name: str
    queue: str
    cpu: int
    priority: int
    kind: str = WORKLOAD  # or a job kind of benchmarks.side_by_side.kinds, whose Workload the controller makes
    pods_ready: bool = True  # a Job's: False, its pod can be placed on no node, so it is never ready
    gang: Gang | None = None  # a standalone Workload asking GPUs of a TAS flavor instead of cpu

    @property
    def key(self) -> str:
        return f"{namespace_of(self.queue)}/{self.name}"


@dataclass(frozen=True, slots=True)
class Phase:
    title: str
    create: tuple[ScenarioWorkload, ...] = ()
    finish: tuple[str, ...] = ()  # workload names
    answer: tuple[tuple[str, str], ...] = ()  # (workload name, Ready, Retry or Rejected): its check's state, by hand
    lasts: float = 0.0  # the phase lasts at least this many seconds (a timeout to pass), live and in the floor

    @property
    def spacing(self) -> float:
        """Simulated seconds from this phase to the next (its snapshot is half a PHASE_SPACING before that)."""
        return self.lasts + PHASE_SPACING


@dataclass(frozen=True, slots=True)
class Scenario:
    phases: tuple[Phase, ...]
    objects: tuple[Manifest, ...]
    configuration: Mapping[str, Any] = field(default_factory=dict)  # Configuration fields, for both and the floor
    node_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # added to the fake nodes, by name


# Where a holder's pods are: per pod set placed by topology-aware scheduling, its pods per domain (the domain's
# values joined by "/", highest level first), both sorted; empty for a workload without TAS.
Placement = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
# The workloads holding quota after a phase (namespace/name), each with its placement.
Snapshot = Mapping[str, Placement]


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


def _queue_objects(queue: str, cohort_name: str | None, quota: ResourceQuota, flavor: str = "rf") -> list[Manifest]:
    """A scenario queue's namespace, ClusterQueue (reclaiming from anyone, preempting lower priorities in the
    queue) and LocalQueue."""
    return [
        namespace(namespace_of(queue)),
        cluster_queue(
            f"cq-{queue}",
            cohort_name=cohort_name,
            flavor=flavor,
            quotas=(quota,),
            namespace_selector={},
            reclaim_within_cohort="Any",
            within_cluster_queue="LowerPriority",
        ),
        local_queue(QueueTarget(namespace_of(queue), LOCAL_QUEUE), f"cq-{queue}"),
    ]


def _common_objects(scenario: Sequence[Phase]) -> list[Manifest]:
    objects: list[Manifest] = [resource_flavor("rf")]
    for priority in sorted({w.priority for w in _workloads(scenario)}):
        objects.append(workload_priority_class(priority_class(priority), priority, "agreement scenario"))
    return objects


def scenario_objects(scenario: Sequence[Phase] = SCENARIO) -> list[Manifest]:
    objects = _common_objects(scenario)
    for queue in QUEUES:
        objects += _queue_objects(queue, COHORT, ResourceQuota("cpu", 10, borrowing_limit=10))
    for name, (parent, owned) in NESTED_COHORTS.items():
        objects.append(cohort(name, parent=parent, flavor="rf", quotas=(ResourceQuota("cpu", owned),) if owned else ()))
    for queue, (parent, nominal) in NESTED_QUEUES.items():
        objects += _queue_objects(queue, parent, ResourceQuota("cpu", nominal))
    for queue in KINDS_QUEUES:
        objects += _queue_objects(queue, KINDS_COHORT, ResourceQuota("cpu", 10, borrowing_limit=10))
    return objects


CHECKS_PHASES = (
    Phase(
        "timeout: stuck-0, whose pod is never ready, is admitted",
        create=(ScenarioWorkload("stuck-0", "r", 10, 610, JOB, pods_ready=False),),
    ),
    Phase(
        "timeout: stuck-0 times out and backs off, wait-0 is admitted",
        create=(ScenarioWorkload("wait-0", "r", 10, 600, JOB),),
        lasts=PODS_READY_TIMEOUT,
    ),
    Phase(
        "checks: chk-0 reserves quota, its check Pending",
        create=(ScenarioWorkload("chk-0", "k", 10, 720, JOB), ScenarioWorkload("chk-1", "k", 10, 710, JOB)),
    ),
    Phase("checks: chk-0's check Retry: evicted, requeued, it reserves again", answer=(("chk-0", "Retry"),)),
    Phase(
        "checks: chk-0's check Rejected: deactivated, chk-1 reserves",
        create=(ScenarioWorkload("chk-2", "k", 10, 700, JOB),),
        answer=(("chk-0", "Rejected"),),
    ),
    Phase("checks: chk-1's check Ready: admitted", answer=(("chk-1", "Ready"),)),
)


def checks_objects(scenario: Sequence[Phase] = CHECKS_PHASES) -> list[Manifest]:
    """Queues r and k, k running AdmissionCheck gate on every flavor."""
    objects = _common_objects(scenario)
    objects.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": CHECK_CONTROLLER},
        }
    )
    objects += _queue_objects("r", None, ResourceQuota("cpu", 10))
    checked = _queue_objects("k", None, ResourceQuota("cpu", 10))
    checked[1]["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    return objects + checked


def _gang(name: str, priority: int, gang: Gang) -> ScenarioWorkload:
    return ScenarioWorkload(name, TAS_QUEUE, 0, priority, gang=gang)


TOPOLOGY_PHASES = (
    Phase(
        "racks: t-a (3 x 8 GPUs) prefers a rack, none holds it: it spans both, a pod a node",
        create=(_gang("t-a", 510, Gang(3, 8, "preferred", RACK)),),
    ),
    Phase(
        "racks: t-b (2 x 8) requires a rack, none has room: it waits",
        create=(_gang("t-b", 520, Gang(2, 8, "required", RACK)),),
    ),
    Phase(
        "racks: t-a finishes: t-b takes r1, the only rack that holds it, t-c (1 x 8, prefers a rack) r2",
        create=(_gang("t-c", 505, Gang(1, 8, "preferred", RACK)),),
        finish=("t-a",),
    ),
    Phase(
        "racks: t-b finishes: t-d (4 x 4, requires a rack) takes r1, two pods a node",
        create=(_gang("t-d", 530, Gang(4, 4, "required", RACK)),),
        finish=("t-b",),
    ),
    Phase(
        "racks: t-c finishes: t-e (2 x 4, requires a node) takes h100-2",
        create=(_gang("t-e", 540, Gang(2, 4, "required", HOSTNAME)),),
        finish=("t-c",),
    ),
)


def topology_objects(scenario: Sequence[Phase] = TOPOLOGY_PHASES) -> list[Manifest]:
    """A Topology of racks and hosts, a TAS flavor on the fake H100 nodes (tolerating their GPU taint) and queue t
    with quota for more GPUs than the nodes have, preempting nothing: only the topology can refuse."""
    objects = _common_objects(scenario)
    objects.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": TOPOLOGY_NAME},
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]},
        }
    )
    flavor = resource_flavor("rf-tas", node_labels={"gpu-type": "h100"}, tolerations=(GPU_TOLERATION,))
    flavor["spec"]["topologyName"] = TOPOLOGY_NAME
    objects.append(flavor)
    queue = _queue_objects(TAS_QUEUE, None, ResourceQuota(GPU_RESOURCE, 48), flavor="rf-tas")
    queue[1]["spec"]["preemption"] = {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}
    return objects + queue


DECISIONS = Scenario(SCENARIO, tuple(scenario_objects(SCENARIO)))
CHECKS = Scenario(CHECKS_PHASES, tuple(checks_objects(CHECKS_PHASES)), CHECKS_CONFIGURATION)
TOPOLOGY = Scenario(
    TOPOLOGY_PHASES,
    tuple(topology_objects(TOPOLOGY_PHASES)),
    node_labels={node: {RACK: rack} for node, rack in NODE_RACKS.items()},
)


def scenario_nodes(scenario: Scenario) -> list[dict[str, Any]]:
    """The fake nodes a fresh control plane has, with the scenario's labels, as v1 Nodes."""
    nodes = [pool.node_manifest(name) for pool in DEFAULT_POOLS for name in pool.node_names()]
    unknown = set(scenario.node_labels) - {node["metadata"]["name"] for node in nodes}
    if unknown:
        raise MeasureError(f"scenario: labels for nodes a fresh control plane lacks: {sorted(unknown)}")
    for node in nodes:
        node["metadata"]["labels"].update(scenario.node_labels.get(node["metadata"]["name"], {}))
    return nodes


def _line(workload: ScenarioWorkload, submit_at: float, duration: float) -> WorkloadLine:
    return {
        "name": workload.name,
        "namespace": namespace_of(workload.queue),
        "queue": LOCAL_QUEUE,
        "priorityClass": priority_class(workload.priority),
        "submitAt": submit_at,
        "duration": duration,
        "maxExecutionSeconds": None,
        "podSets": _pod_set_lines(workload),
    }


def _pod_set_lines(workload: ScenarioWorkload) -> list[PodSetLine]:
    if workload.gang is not None:
        gang = workload.gang
        requests = {GPU_RESOURCE: str(gang.gpus)}
        return [{"name": "main", "count": gang.pods, "requests": requests, "nodeSelector": {}, "tolerations": []}]
    return [
        {
            "name": shape.name,
            "count": shape.count,
            "requests": {"cpu": str(shape.cpu)},
            "nodeSelector": {},
            "tolerations": [],
        }
        for shape in kinds.pod_sets(workload.kind, workload.cpu)
    ]


def _with_topology_request(pod_sets: list[dict[str, Any]], workload: ScenarioWorkload) -> list[dict[str, Any]]:
    """A gang's pod set (a line's or a Workload's) with its ``topologyRequest``; other pod sets as they are."""
    if workload.gang is None:
        return pod_sets
    request = {workload.gang.placement: workload.gang.level}
    return [{**pod_set, "topologyRequest": request} for pod_set in pod_sets]


def _floor_line(
    workload: ScenarioWorkload, submit_at: float, duration: float, checks: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The line the floor replays: whether its pods get ready, how its check answers (``checks``), where its
    gang goes."""
    line = _line(workload, submit_at, duration)
    return {
        **line,
        "podSets": _with_topology_request([dict(pod_set) for pod_set in line["podSets"]], workload),
        "podsReadyAfter": 0 if workload.pods_ready else None,
        "admissionChecks": {CHECK: dict(checks)} if checks is not None else None,
    }


def _priorities(scenario: Sequence[Phase]) -> dict[str, int]:
    return {priority_class(w.priority): w.priority for w in _workloads(scenario)}


def phase_instants(scenario: Sequence[Phase]) -> list[float]:
    """When each phase starts, in simulated seconds."""
    instants = [0.0]
    for phase in scenario[:-1]:
        instants.append(instants[-1] + phase.spacing)
    return instants


def _next_answer(name: str, before: dict[str, Any] | None, after: float, state: str, phase: int) -> dict[str, Any]:
    """A workload's line ``admissionChecks`` entry with one more answer, ``after`` seconds after the reservation it
    answers. A line declares one delay for every reservation, Retries first, then a rejection or Ready: answers
    that do not fit that are refused."""
    if before is None:
        return {"after": after, **_ANSWERS[state]}
    if before["after"] != after or before.get("reject") or not before.get("retries"):
        raise MeasureError(
            f"scenario: {name}'s check answers {state} in phase {phase}, which its line cannot declare (one delay "
            "after each reservation, Retries first, then Rejected or Ready)"
        )
    if state == "Retry":
        return {**before, "retries": before["retries"] + 1}
    return {**before, **_ANSWERS[state]}


def floor_snapshots(scenario: Scenario = DECISIONS) -> list[dict[str, Placement]]:
    """The holders after each phase under ``kuota simulate``, each with its placement. A workload finished by hand
    in phase k gets the duration that ends it at phase k's instant: from its admission, found by replaying up to
    that instant (it must hold quota then, admitted once). A check answered by hand in phase k answers that many
    seconds after the reservation it answers (the reservation held then), found the same way with the answers
    before it."""
    phases = scenario.phases
    instants = phase_instants(phases)
    created_at = {w.name: instants[index] for index, phase in enumerate(phases) for w in phase.create}
    objects = config_from_dicts(
        [
            *scenario.objects,
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **scenario.configuration},
        ]
    )
    nodes = [topology_node(node) for node in scenario_nodes(scenario)] if scenario.node_labels else []
    durations: dict[str, float] = {}
    answers: dict[str, dict[str, Any]] = {}

    def replayed(until: float) -> ReplayResult:
        lines = [
            (
                f"scenario workload {w.name}",
                _floor_line(w, created_at[w.name], durations.get(w.name, 1e9), answers.get(w.name)),
            )
            for w in _workloads(phases)
        ]
        arrivals = sorted(convert_lines(lines, _priorities(phases)), key=lambda w: w.submit_at)
        return replay(objects, arrivals, until=until, nodes=nodes)

    def holding(result: ReplayResult, name: str, doing: str, phase: int) -> WorkloadHistory:
        history = next(h for h in result.workloads.values() if h.name == name)
        if history.outcome is not Outcome.ADMITTED:
            raise MeasureError(f"scenario: {name} holds no quota for {doing}, in phase {phase}")
        return history

    snapshots = []
    for index, phase in enumerate(phases):
        for name in phase.finish:
            history = holding(replayed(instants[index]), name, "its finish", index + 1)
            if len(history.admissions) != 1:
                raise MeasureError(f"scenario: {name} was admitted more than once, so its line has no duration")
            durations[name] = instants[index] - history.admissions[0].at
        for name, state in phase.answer:
            history = holding(replayed(instants[index]), name, "its check to answer", index + 1)
            answers[name] = _next_answer(
                name, answers.get(name), instants[index] - history.admissions[-1].at, state, index + 1
            )
        result = replayed(instants[index] + phase.spacing - PHASE_SPACING / 2)
        snapshots.append(
            {key: _replayed_placement(h) for key, h in result.workloads.items() if h.outcome is Outcome.ADMITTED}
        )
    return snapshots


def _per_domain(assignment: TopologyAssignment) -> tuple[tuple[str, int], ...]:
    pods: dict[str, int] = {}
    for values, count in assignment.domains:
        domain = "/".join(values)
        pods[domain] = pods.get(domain, 0) + count
    return tuple(sorted(pods.items()))


def _replayed_placement(history: WorkloadHistory) -> Placement:
    topology = history.admissions[-1].topology
    return tuple(sorted((name, _per_domain(assignment)) for name, assignment in topology.items()))


def placement(workload: Mapping[str, Any]) -> Placement:
    """Where a Workload holding quota puts its pods: each pod set's ``topologyAssignment``, in either encoding
    (v1beta2's ``slices``, or v1beta1's ``domains``)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    placed = []
    for assigned in admission.get("podSetAssignments") or []:
        raw = assigned.get("topologyAssignment")
        if raw:
            assignment = decode_domains(raw) if "domains" in raw else decode(raw)
            placed.append((str(assigned["name"]), _per_domain(assignment)))
    return tuple(sorted(placed))


@dataclass(frozen=True, slots=True)
class PhaseComparison:
    title: str
    floor: Snapshot
    kuota: Snapshot
    kueue: Snapshot

    @property
    def agree(self) -> bool:
        return self.floor == self.kuota == self.kueue

    def _sides(self) -> tuple[tuple[str, Snapshot], ...]:
        return (("floor", self.floor), ("kuota", self.kuota), ("Kueue", self.kueue))

    def differences(self) -> list[str]:
        every = set(self.floor) | set(self.kuota) | set(self.kueue)
        lines = []
        for key in sorted(every):
            holders = [name for name, held in self._sides() if key in held]
            if len(holders) != 3:
                lines.append(f"{key} holds quota under {', '.join(holders) or 'none'} only")
            elif not self.floor[key] == self.kuota[key] == self.kueue[key]:
                places = "; ".join(f"{name} {_where(held[key])}" for name, held in self._sides())
                lines.append(f"{key} places its pods differently: {places}")
        return lines


def _where(placed: Placement) -> str:
    """``main: h100-0 x1, h100-1 x1``; pod sets apart by " | "."""
    pod_sets = (f"{name}: {', '.join(f'{domain} x{pods}' for domain, pods in domains)}" for name, domains in placed)
    return " | ".join(pod_sets) or "no topology assignment"


def compare(
    scenario: Sequence[Phase],
    floor: Sequence[Snapshot],
    kuota: Sequence[Snapshot],
    kueue: Sequence[Snapshot],
) -> list[PhaseComparison]:
    if not len(scenario) == len(floor) == len(kuota) == len(kueue):
        raise MeasureError("compare: one snapshot per phase for each of floor, kuota and Kueue")
    return [PhaseComparison(p.title, f, a, b) for p, f, a, b in zip(scenario, floor, kuota, kueue, strict=True)]


def render(comparisons: Sequence[PhaseComparison]) -> str:
    """Per phase: same or DIFFERENT; where all agree, the holders and each one's pods per domain, else every
    difference."""
    lines = []
    for index, comparison in enumerate(comparisons, start=1):
        verdict = "same" if comparison.agree else "DIFFERENT"
        lines.append(f"phase {index}: {comparison.title}: {verdict}")
        if comparison.agree:
            held = comparison.floor
            lines.append(f"    holding quota: {' '.join(sorted(key.split('/', 1)[1] for key in held))}")
            lines += [f"    {key.split('/', 1)[1]} {_where(held[key])}" for key in sorted(held) if held[key]]
        lines += [f"    {difference}" for difference in comparison.differences()]
    return "\n".join(lines) + "\n"


def _manifest(workload: ScenarioWorkload, priorities: dict[str, int]) -> dict[str, Any]:
    """What is created for one scenario workload: the Workload itself, or the job the controller makes it of."""
    if workload.kind == WORKLOAD:
        manifest = workload_manifest(_line(workload, 0.0, 0.0), priority_values=priorities)
        manifest["spec"]["podSets"] = _with_topology_request(manifest["spec"]["podSets"], workload)
        return manifest
    shape = (workload.name, namespace_of(workload.queue), LOCAL_QUEUE, priority_class(workload.priority), workload.cpu)
    if workload.kind == JOB:
        return kinds.job(*shape, schedulable=workload.pods_ready)
    if workload.kind == JOBSET:
        return kinds.jobset(*shape)
    if workload.kind == RAYJOB:
        return kinds.rayjob(*shape)
    if workload.kind == POD_GROUP:
        return {"apiVersion": "v1", "kind": "List", "items": kinds.pod_group(*shape)}
    raise MeasureError(f"scenario workload {workload.name}: unknown kind {workload.kind!r}")


def _plan(phase: Phase, scenario: Sequence[Phase]) -> list[PlannedObject]:
    priorities = _priorities(scenario)
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


async def _play(live: LiveRun, scenario: Sequence[Phase]) -> list[dict[str, Placement]]:
    snapshots = []
    keys = {w.name: w.key for w in _workloads(scenario)}
    await live.open()
    try:
        for phase in scenario:
            began = live.clock()
            created = _plan(phase, scenario)
            await live.create_scheduled(created)
            for name in phase.finish:
                await live.finish(keys[name])
            for name, state in phase.answer:
                await live.answer_check(keys[name], CHECK, state)
            while live.clock() - began < phase.lasts:
                live.check_watch()
                await asyncio.sleep(0.2)
            await _quiet(live, [p.key for p in created], began)
            placed = {key: placement(live.latest[key]) for key in live.holding()}
            for key, where in placed.items():
                if where:
                    await _same_placement_in_v1beta1(live, key, where)
            snapshots.append(placed)
    finally:
        await live.close()
    return snapshots


async def _same_placement_in_v1beta1(live: LiveRun, key: str, where: Placement) -> None:
    """The controller's conversion webhook serves the Workload in v1beta1 (``levels`` + ``domains``) with the
    placement its v1beta2 copy (``slices``) holds."""
    metadata = live.latest[key]["metadata"]
    path = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{metadata['namespace']}/workloads/{metadata['name']}"
    older = await live.api.get(path)
    if older is None:
        raise MeasureError(f"{key}: gone when read through v1beta1")
    assigned = ((older.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    if any("domains" not in (a.get("topologyAssignment") or {"domains": []}) for a in assigned):
        raise MeasureError(f"{key}: read through v1beta1 without v1beta1's domains: is its conversion webhook on?")
    if placement(older) != where:
        raise MeasureError(f"{key}: v1beta1 places it {placement(older)}, v1beta2 {where}")


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


def run_live(name: str, scenario: Scenario = DECISIONS, keep_under: Path | None = None) -> list[dict[str, Placement]]:
    """The holders after each phase under controller ``name`` ("kuota" or "Kueue"), each with its placement."""
    all_plans = [planned for phase in scenario.phases for planned in _plan(phase, scenario.phases)]
    on_cluster = controller_on_fresh_cluster(
        name,
        list(scenario.objects),
        keep_under,
        kinds.FRAMEWORKS,
        scenario.configuration,
        node_labels=scenario.node_labels,
    )
    with on_cluster as (cluster, controller):

        async def drive() -> list[dict[str, Placement]]:
            async with api_for(cluster) as api:
                return await _play(LiveRun(api, all_plans), scenario.phases)

        return measured(cluster, controller, drive).outcome
