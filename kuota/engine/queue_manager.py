"""Where every workload is and when a set-aside head is tried again: the engine's queue manager.

Kueue splits this from the scheduler as ``pkg/queue`` and ``pkg/cache``; here it keeps the structures of
``queues`` up to date as workloads come and go (routing a pending workload to its ClusterQueue's group of its
shape, or holding it with the reason it cannot go), rebuilds them when the configuration changes, and owns the
rules by which a head the scheduler set aside waits and wakes. It decides no admission: ``scheduler`` does,
and tells it what happened (``set_aside``, ``wake_on_free``, ``wake_preemptors``).

A set-aside group is woken (put back in its queue, to be tried again) only when something could make its head
admissible (its ``WakeConditions``):

- one that needs preemption (victims exist but do not suffice): any quota freed in its cohort tree;
- one that only waits for quota: it awaits a free in its tree (``Tree.awaiting_free``), then is indexed by
  what it needs (``Tree.by_need``), and the scheduling loop wakes it when that is available to its queue
  (every flavor's requests, a request that kept it from preempting, or, where it may preempt, all it waited
  for in one flavor: what else it requests may have been taken meanwhile, by borrowers it could reclaim
  from), in order with the other heads, so freed quota wakes only what can use it; one that would not get
  that even with the rest of the tree idle (its own usage and borrowingLimit keep it out:
  ``QuotaTree.ceiling``) awaits a free in its own queue instead (``Queue.awaiting_own_free``);
- one whose own usage must fall before it may reclaim: a free in its own queue that reaches that limit;
- one that could preempt a newly admitted workload (by priority and policy): that admission.
- one whose flavor walk stopped at a flavor needing preemption that more usage could rule out, so that a
  later flavor is tried (``whenCanPreempt: MayStopSearch``): any admission in its tree;
- one the topology refused, or a TAS head that may preempt: capacity freed on its TAS flavors' nodes, in any
  tree (``wake_on_topology_free``: the nodes are shared across cohorts).

A set-aside group's reason is the one from its head's last attempt; as heads are tried only when they may
succeed, the amounts "in use" it quotes can be older than the current ones. With fair sharing, every set-aside
group is woken at every instant so that its head ranks its queue.

Not to be confused with a workload *held* (``_held``: no queue can take it as configured, or its queue is
stopped or inactive), a *blocked* StrictFIFO queue (``Queue.blocked``: its head was set aside, and the queue
offers nothing behind it), or a PodsReady *backoff* (``WorkloadState.BACKOFF``: evicted, and requeued at a
time, by ``scheduler``).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Mapping

from kuota.engine.decisions import EvictionReason, WorkloadState, WorkloadStatus
from kuota.engine.flavor_assignment import FlavorAssigner
from kuota.engine.model import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    PodSet,
    QueueingStrategy,
    ReclaimPolicy,
    ResourceFlavor,
    StopPolicy,
    WithinClusterQueuePolicy,
    Workload,
)
from kuota.engine.preemption import AdmittedWorkload
from kuota.engine.queues import (
    COMPACT_FLOOR,
    FitOptions,
    Group,
    NeedIndex,
    Queue,
    Record,
    SortKey,
    Tree,
    WakeConditions,
    lending_limited_under,
)
from kuota.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree
from kuota.engine.topology_admission import TopologyPlacer


def may_preempt(cq: ClusterQueue, fair_sharing: bool) -> bool:
    """Whether ``cq``'s policy lets its workloads preempt at all."""
    preemption = cq.preemption
    return (
        fair_sharing
        or preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
        or (cq.cohort is not None and preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER)
    )


def may_reclaim(cq: ClusterQueue) -> bool:
    return cq.cohort is not None and cq.preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER


def reason_of(record: Record) -> str | None:
    """Why a workload is not admitted (None when it is, or when nothing has been said yet)."""
    if record.state is WorkloadState.ADMITTED:
        return None
    if record.state is WorkloadState.BACKOFF:
        if record.reason is not None:  # the eviction said why it waits
            return str(record.reason)
        return f"requeued after a PodsReady timeout; backing off until {record.requeue_at}"
    if record.reason is not None:
        return str(record.reason)
    queue = record.queue
    if queue is None:
        return None
    if queue.inactive is not None:
        return queue.inactive
    if queue.stopped:
        return f"ClusterQueue {queue.model.name} is stopped (stopPolicy {queue.model.stop_policy.value})"
    group = record.group
    if group is not None and group.set_aside:
        return None if group.reason is None else str(group.reason)
    if queue.blocked is not None:
        return f"waiting in StrictFIFO ClusterQueue {queue.model.name} behind a head that does not fit: {queue.blocked}"
    return f"waiting for its turn in ClusterQueue {queue.model.name}"


def workload_status(record: Record, reason: str | None, *, waiting_for_pods_ready: bool = False) -> WorkloadStatus:
    queue = record.queue.model.name if record.queue is not None else None
    if record.state is WorkloadState.ADMITTED and record.admitted is not None:
        queue = record.admitted.cluster_queue
    # A set-aside group's members share its head's verdict, as they share its reason.
    group = record.group
    inadmissible = record.inadmissible or (group is not None and group.set_aside and group.inadmissible)
    return WorkloadStatus(record.state, queue, reason, inadmissible, waiting_for_pods_ready)


class QueueManager:
    """Every workload the engine knows and where it is: pending in a group of its ClusterQueue, held, admitted,
    backing off or deactivated; the queues and cohort trees built from the configuration; the set-aside
    indexes. ``rebuild`` makes it agree with a changed configuration."""

    def __init__(self) -> None:
        # The configuration objects the state was last built from (the engine's own mappings).
        self.configuration = Configuration()
        self.flavors: Mapping[str, ResourceFlavor] = {}
        self.cluster_queues: Mapping[str, ClusterQueue] = {}
        self.cohorts: Mapping[str, Cohort] = {}
        self.local_queues: Mapping[tuple[str, str], LocalQueue] = {}
        self.namespaces: Mapping[str, Namespace] = {}
        self.admission_checks: Mapping[str, AdmissionCheck] = {}
        self.records: dict[str, Record] = {}
        self.queues: dict[str, Queue] = {}
        self.trees: dict[str, Tree] = {}
        self.dirty: set[str] = set()  # roots of the trees where something changed since they were scheduled
        self._held: dict[str, Record] = {}  # pending, but no queue can take them as configured
        # _routing_problem's answer per (namespace, LocalQueue name): it depends on the configuration alone.
        self._routes: dict[tuple[str, str], tuple[str, bool] | None] = {}
        # One sequence for every tiebreak the engine hands out (heap entries, admission order).
        self.sequence = itertools.count()
        # Admitted workloads whose (Cluster or Local) queue has stopPolicy HoldAndDrain: due for eviction.
        self.drains: list[tuple[str, EvictionReason]] = []
        self._last_now: float | None = None
        # Heads set aside only because they were preempted at this instant: tried again at the next one.
        self.wake_next_instant: list[Group] = []
        # Groups of workloads preempted at this instant: at the next one they join their shape's usual group.
        self._preempted_groups: list[Group] = []
        self.tree = QuotaTree({}, {})
        self.topology = TopologyPlacer()
        # Set-aside groups waiting for capacity freed on a TAS flavor's nodes, by flavor (see WakeConditions).
        self._topology_waiters: dict[str, dict[int, Group]] = {}
        # waitForPodsReady's blockAdmission: whether it is on, the admitted workloads whose pods a shell has not
        # reported ready (always empty while it is off), and the head held back while there are any.
        self.blocks_admission = False
        self.not_ready: set[str] = set()
        self.pods_ready_waiter: str | None = None

    def rebuild(
        self,
        configuration: Configuration,
        *,
        flavors: Mapping[str, ResourceFlavor],
        cluster_queues: Mapping[str, ClusterQueue],
        cohorts: Mapping[str, Cohort],
        local_queues: Mapping[tuple[str, str], LocalQueue],
        namespaces: Mapping[str, Namespace],
        admission_checks: Mapping[str, AdmissionCheck],
    ) -> None:
        """Build the queues and trees afresh from the configuration, then put every workload back."""
        self.configuration = configuration
        self.flavors = flavors
        self.cluster_queues = cluster_queues
        self.cohorts = cohorts
        self.local_queues = local_queues
        self.namespaces = namespaces
        self.admission_checks = admission_checks
        self.tree = QuotaTree(self.cluster_queues, self.cohorts)
        self.topology.configure(flavors)
        fair = self.configuration.fair_sharing is not None
        wait = configuration.wait_for_pods_ready
        blocks = wait is not None and wait.block_admission
        if not blocks:
            self.not_ready.clear()
        elif not self.blocks_admission:  # turned on: nothing is known ready until a shell says so
            self.not_ready = {key for key, record in self.records.items() if record.state is WorkloadState.ADMITTED}
        self.blocks_admission = blocks
        self.queues = {}
        self.trees = {}
        for name in sorted(self.cluster_queues):
            cq = self.cluster_queues[name]
            root = "cohort/" + self.tree.cluster_queues[name].root().name if cq.cohort else "queue/" + name
            inactive, condition = self._inactive_reason(cq)
            assigner = None if inactive else FlavorAssigner(cq, self.tree, self.flavors, fair, self.topology.topologies)
            self.queues[name] = Queue(cq, assigner, root, inactive, condition)
            tree = self.trees.get(root)
            if tree is None:
                top = self.tree.cluster_queues[name].root()
                tree = self.trees[root] = Tree(top, lending_limited_under(top))
            tree.queues.append(name)
            self.queues[name].heads = tree.heads
        self.dirty = set(self.trees)
        self._topology_waiters = {}
        self._held = {}
        self._routes = {}
        self._preempted_groups = []
        for record in self.records.values():
            record.queue = None
            record.group = None
            if record.state is WorkloadState.ADMITTED and record.admitted is not None:
                queue = self.queues.get(record.admitted.cluster_queue)
                if queue is not None:
                    queue.admitted[record.workload.key] = record.admitted
                    queue.by_priority.add(record.admitted)
                    self.tree.add_usage(queue.model.name, record.admitted.assignment.usage, 1)
                    record.queue = queue
                    if queue.model.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                        self.drains.append((record.workload.key, EvictionReason.CLUSTER_QUEUE_STOPPED))
                    local = self.local_queues.get((record.workload.namespace, record.workload.queue_name))
                    if local is not None and local.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                        self.drains.append((record.workload.key, EvictionReason.LOCAL_QUEUE_STOPPED))
        for record in sorted(self.records.values(), key=lambda r: r.sort_key):
            if record.state is WorkloadState.PENDING:
                self.route(record)

    def begin_instant(self, now: float) -> None:
        """Once per instant, before its decisions: what waited for the instant to pass is tried again."""
        if now != self._last_now:
            self._last_now = now
            for group in self._preempted_groups:
                self._regroup(group)
            self._preempted_groups.clear()
            for group in self.wake_next_instant:
                if id(group) in self.trees[group.queue.root].set_aside:
                    self._wake(group)
            self.wake_next_instant.clear()
            if self.configuration.fair_sharing is not None:
                # Shares, not age, order the queues: a set-aside head ranks its queue by its own share at every
                # instant (it is tried and set aside again), or the workload behind it would jump that rank.
                for root, tree in self.trees.items():
                    if tree.set_aside:
                        self._wake_all(root)

    def _inactive_reason(self, cq: ClusterQueue) -> tuple[str | None, tuple[str, str] | None]:
        """Why ``cq`` admits nothing (None: it is active), and its ``Active`` condition's reason and message as
        Kueue's cache words them (None where Kueue has no word for the cause)."""
        missing = [
            flavor.name for group in cq.resource_groups for flavor in group.flavors if flavor.name not in self.flavors
        ]
        checks = sorted(rule.name for rule in cq.admission_checks)
        missing_checks = [name for name in checks if name not in self.admission_checks]
        inactive_checks = [
            name for name in checks if name in self.admission_checks and not self.admission_checks[name].active
        ]
        causes: list[tuple[str, str, str]] = []  # (Kueue's reason, Kueue's words, kuota's)
        if missing:
            names = ", ".join(missing)
            causes.append(
                (
                    "FlavorNotFound",
                    f"references missing ResourceFlavor(s): {','.join(missing)}",
                    f"ResourceFlavor {names} does not exist (FlavorNotFound): create it",
                )
            )
        if missing_checks:
            names = ", ".join(missing_checks)
            causes.append(
                (
                    "AdmissionCheckNotFound",
                    f"references missing AdmissionCheck(s): {','.join(missing_checks)}",
                    f"AdmissionCheck {names} does not exist (AdmissionCheckNotFound): create it",
                )
            )
        if inactive_checks:
            names = ", ".join(inactive_checks)
            causes.append(
                (
                    "AdmissionCheckInactive",
                    f"references inactive AdmissionCheck(s): {','.join(inactive_checks)}",
                    f"AdmissionCheck {names} is not active (AdmissionCheckInactive): its controller sets it Active",
                )
            )
        if causes:
            condition = (causes[0][0], f"Can't admit new workloads: {', '.join(words for _, words, _ in causes)}.")
            return f"ClusterQueue {cq.name} is inactive: {'; '.join(text for _, _, text in causes)}", condition
        cycle = self.tree.in_cycle(cq.name)
        if cycle is not None:
            return (
                f"ClusterQueue {cq.name} is inactive: its Cohort {cycle} is in a parentName cycle: break the cycle",
                None,
            )
        return None, None

    def route(self, record: Record) -> None:
        """Put a pending workload into its ClusterQueue's groups, or hold it with the reason it cannot go."""
        workload = record.workload
        record.reason = None
        record.inadmissible = False
        route = (workload.namespace, workload.queue_name)
        if route in self._routes:
            problem = self._routes[route]
        else:
            problem = self._routes[route] = self._routing_problem(workload)
        if problem is not None:
            record.reason, record.inadmissible = problem
            self._held[workload.key] = record
            return
        local = self.local_queues[(workload.namespace, workload.queue_name)]
        queue = self.queues[local.cluster_queue]
        record.queue = queue
        queue.pending += 1
        if queue.inactive is not None or queue.stopped:
            self._held[workload.key] = record
            return
        self._place(queue, record)

    def _place(self, queue: Queue, record: Record) -> None:
        """Put a routed pending workload into the group of its shape."""
        shape = record.shape(self._last_now)
        group = queue.groups.get(shape)
        if group is None or (
            group.set_aside and (head := group.head(self.records)) is not None and record.sort_key < head.sort_key
        ):
            # A newcomer that sorts before a set-aside head starts its own group: it may do better.
            elder = group
            group = Group(queue, shape)
            group.elder = elder
            queue.groups[shape] = group
            if shape[-1] is not None:
                self._preempted_groups.append(group)
        record.group = group
        heapq.heappush(group.members, (record.sort_key, record.workload.key))
        head = group.head(self.records)
        if not group.set_aside and head is record:
            queue.push(group, record)
        if queue.blocked is not None:
            peeked = queue.peek(self.records)
            if peeked is not None and peeked[1] is record:
                queue.blocked = None
        self.dirty.add(queue.root)

    def _routing_problem(self, workload: Workload) -> tuple[str, bool] | None:
        if not workload.queue_name:
            return ("the workload names no LocalQueue: set the kueue.x-k8s.io/queue-name label", True)
        local = self.local_queues.get((workload.namespace, workload.queue_name))
        if local is None:
            return (
                f"LocalQueue {workload.queue_name} does not exist in namespace {workload.namespace}: create it "
                "or fix the kueue.x-k8s.io/queue-name label",
                True,
            )
        cq = self.cluster_queues.get(local.cluster_queue)
        if cq is None:
            return (
                f"ClusterQueue {local.cluster_queue} (of LocalQueue {workload.namespace}/{local.name}) does "
                "not exist: create it",
                True,
            )
        namespace = self.namespaces.get(workload.namespace)
        labels = namespace.labels if namespace else {"kubernetes.io/metadata.name": workload.namespace}
        if cq.namespace_selector is None or not cq.namespace_selector.matches(labels):
            return (
                f"namespace {workload.namespace} is not selected by ClusterQueue {cq.name}: fix its "
                "namespaceSelector (unset selects no namespace, {} selects all)",
                True,
            )
        if local.stop_policy is not StopPolicy.NONE:
            return (
                f"LocalQueue {workload.namespace}/{local.name} is stopped (stopPolicy {local.stop_policy.value})",
                False,
            )
        return None

    def unroute(self, record: Record) -> None:
        """Take a workload out of wherever it waits (it is admitted, finished, or replaced by a new spec)."""
        self._held.pop(record.workload.key, None)
        if record.state is WorkloadState.PENDING and record.queue is not None:
            record.queue.pending -= 1
        group = record.group
        record.group = None
        record.queue = None
        if group is not None and not group.set_aside:
            head = group.head(self.records)
            if head is not None:
                group.queue.push(group, head)
            elif group.queue.groups.get(group.shape) is group:
                del group.queue.groups[group.shape]  # empty and not set aside: nothing to remember

    def _regroup(self, group: Group) -> None:
        """The instant its members were preempted at has passed: they now share their shape's usual group."""
        queue = group.queue
        if queue.groups.get(group.shape) is group:
            del queue.groups[group.shape]
        members = [
            record
            for _, key in group.members
            if (record := self.records.get(key)) is not None
            and record.group is group
            and record.state is WorkloadState.PENDING
        ]
        group.members = []
        if id(group) in self.trees[queue.root].set_aside:
            self._wake(group)
        for record in members:
            self._place(queue, record)

    def set_aside(self, tree: Tree, queue: Queue, group: Group, head: Record, wake_conditions: WakeConditions) -> None:
        """``head``, the head of ``group``, could not be admitted: set the group aside (for a StrictFIFO queue,
        block the queue) until what ``wake_conditions`` names could make it admissible, with the head's
        reason."""
        if queue.model.queueing_strategy is not QueueingStrategy.STRICT_FIFO:
            elder = group.elder
            group.elder = None
            if elder is not None and elder.set_aside:
                group = self._fold(tree, group, elder)
        group.wake_conditions = wake_conditions
        self._index_set_aside(tree, group)
        if queue.model.queueing_strategy is QueueingStrategy.STRICT_FIFO:
            queue.blocked = head.reason
            head.reason = None
            group.reason = queue.blocked
        else:
            group.set_aside = True
            group.reason = head.reason
            group.inadmissible = head.inadmissible
            head.reason = None

    def _index_set_aside(self, tree: Tree, group: Group) -> None:
        group.epoch += 1
        group.need_epoch += 1
        tree.set_aside[id(group)] = group
        if group.wake_conditions.own_queue:
            group.queue.own_waiters[id(group)] = group
        if group.wake_conditions.other_queues:
            tree.reclaimers[id(group)] = group
        if group.wake_conditions.any_admission:
            tree.any_admission_waiters[id(group)] = group
        for flavor in group.wake_conditions.topology_flavors:
            self._topology_waiters.setdefault(flavor, {})[id(group)] = group
        needs = group.wake_conditions.needs
        if needs is None:
            (group.queue.capped if group.wake_conditions.own_frees_only else tree.any_free)[id(group)] = group
            return
        if needs:
            tree.awaiting_free.append((group.need_epoch, group))
        for fr, limit in group.wake_conditions.reclaim_limits.items():
            waiting = group.queue.reclaim_waiting.setdefault(fr, [])
            heapq.heappush(waiting, (-limit, next(self.sequence), group.epoch, group))
            # Outdated entries leave only from the top; drop them in bulk now and then (see NeedIndex.add).
            compact_at = group.queue.reclaim_compact_at
            if len(waiting) > compact_at.get(fr, COMPACT_FLOOR):
                waiting[:] = [e for e in waiting if e[2] == e[3].epoch]
                heapq.heapify(waiting)
                compact_at[fr] = max(COMPACT_FLOOR, 2 * len(waiting))

    def _fold(self, tree: Tree, young: Group, elder: Group) -> Group:
        """``young``'s head, which sorts before ``elder``'s, just failed: ``elder``'s members can do no better,
        so both become one group (``elder``, to be set aside again with ``young``'s verdict)."""
        for entry in young.members:
            record = self.records.get(entry[1])
            if record is not None and record.group is young:
                record.group = elder
                heapq.heappush(elder.members, entry)
        young.members = []
        queue = young.queue
        if queue.groups.get(young.shape) is young:
            queue.groups[young.shape] = elder
        for index in (
            tree.set_aside,
            tree.any_free,
            tree.reclaimers,
            tree.any_admission_waiters,
            queue.own_waiters,
            queue.capped,
        ):
            index.pop(id(elder), None)
        self._forget_topology_wait(elder)
        return elder

    def _index_by_need(self, tree: Tree, group: Group) -> None:
        """Index a group that awaited a free under what could let it succeed: one resource of each flavor it waits for
        (all of a flavor's requests must be available to fit there), and each resource that keeps it from
        preempting (see ``_may_succeed``)."""
        head = group.head(self.records)
        if head is None:
            self._wake(group)
            return
        needs = group.wake_conditions.needs
        assert needs is not None
        keys: dict[FlavorResource, int] = {}
        flavors: set[str] = set()
        # Where it may reclaim, any one resource becoming available may leave a shortage it can reclaim.
        every = may_reclaim(group.queue.model)
        for fr in sorted(needs):
            if every or fr[0] not in flavors:
                flavors.add(fr[0])
                keys[fr] = needs[fr]
        blocking = self.prepare(group, head)[1]
        if blocking:
            keys.update(blocking)
        by_need = tree.by_need
        for fr, need in keys.items():
            index = by_need.get(fr)
            if index is None:
                index = by_need[fr] = NeedIndex()
            index.add(need, (head.sort_key, next(self.sequence), group.need_epoch, group))

    def prepare(self, group: Group, head: Record) -> tuple[FitOptions, dict[FlavorResource, int]]:
        """What ``_may_succeed`` checks for the group's shape: what its (single) pod set would take per
        resource group and flavor, and what keeps it from trying to preempt. Worked out once per queue and
        shape (it depends on quotas only)."""
        if group.prepared is not None:
            return group.prepared
        queue = group.queue
        shape = group.shape[:-1]  # whether preempted at this instant changes neither
        prepared = queue.prepared.get(shape)
        if prepared is None:
            assert queue.assigner is not None
            options = self._fit_options(queue, head.workload.pod_sets[0])
            blocking: dict[FlavorResource, int] = {}
            # Requests past nominal quota make a flavor NO_FIT, for a queue that may not preempt past it: once
            # such a request is available the mode may become PREEMPT, and a full attempt may find victims.
            if not queue.assigner.may_preempt_past_nominal:
                node = self.tree.cluster_queues[queue.model.name]
                blocking = {
                    fr: need
                    for flavors in options
                    for flavor in flavors
                    for fr, need in flavor
                    if node.subtree.get(fr, 0) < need <= self.tree.potential_available(node, fr)
                }
            prepared = queue.prepared[shape] = (options, blocking)
        group.prepared = prepared
        return prepared

    def _may_succeed(self, group: Group, head: Record, *, ceiling: bool) -> bool:
        """Whether an attempt of ``head`` could succeed with the quota available to its queue now (with
        ``ceiling``, however much the rest of the tree freed: ``QuotaTree.ceiling``): every resource group has a
        flavor with all its requests available (it may fit), or a request that kept it from preempting is
        available, or (in a queue that may preempt) all it waited for in some flavor is available."""
        options, blocking = self.prepare(group, head)
        queue = group.queue
        node = self.tree.cluster_queues[queue.model.name]
        for flavors in options:
            for option in flavors:
                for fr, amount in option:
                    if amount > self._room(node, fr, ceiling=ceiling):
                        break
                else:
                    break  # this flavor may fit
            else:
                break  # no flavor of this resource group may fit
        else:
            return True
        for fr, need in blocking.items():
            if need <= self._room(node, fr, ceiling=ceiling):
                return True
        if not may_preempt(queue.model, self.configuration.fair_sharing is not None):
            return False
        # Its wake conditions were worked out when only the resources it waits for were short. If they are available now
        # and it still does not fit, others were taken since (by a borrower, say): it may preempt for those.
        # Or a shortage that is left only where it fits its nominal quota, which it may reclaim from borrowers.
        needs = group.wake_conditions.needs
        assert needs is not None
        reclaims = may_reclaim(queue.model)
        usage = node.usage
        subtree = node.subtree
        waited: dict[str, bool] = {}
        for fr, need in needs.items():
            reachable = need <= self._room(node, fr, ceiling=ceiling) or (
                reclaims and usage.get(fr, 0) + need <= subtree.get(fr, 0)
            )
            waited[fr[0]] = waited.get(fr[0], True) and reachable
        return any(waited.values())

    def _room(self, node: QuotaNode, fr: FlavorResource, *, ceiling: bool) -> int:
        """``QuotaTree.available`` or, with ``ceiling``, ``QuotaTree.ceiling``: chosen here, not passed in as a
        bound method, so that the compiled call is a direct one (it runs for every group awaiting a free, at a free)."""
        return self.tree.ceiling(node, fr) if ceiling else self.tree.available(node, fr)

    @staticmethod
    def _fit_options(queue: Queue, pod_set: PodSet) -> FitOptions:
        """Per resource group the pod set uses: per flavor, what it would take there (a resource no group
        covers gives a group with no flavor, which never fits)."""
        assert queue.assigner is not None
        requests = pod_set.requests
        uncovered, steps = queue.assigner.plan(tuple(requests))
        if uncovered:
            return ((),)
        return tuple(
            tuple(tuple(((name, r), requests[r] * pod_set.count) for r in resources) for name, _, _ in flavors)
            for resources, flavors in steps
        )

    def _bound(self, tree: Tree, fr: FlavorResource) -> int:
        """At least what any queue of the tree has available of ``fr`` (exact at the root without lendingLimits)."""
        if fr in tree.lending_limited:
            return max(self.tree.available(self.tree.cluster_queues[name], fr) for name in tree.queues)
        root = tree.root
        return root.subtree.get(fr, 0) - root.usage.get(fr, 0)

    def best_by_need(self, tree: Tree) -> tuple[SortKey, Group] | None:
        """The best-ordered group in the need index whose needs may be available; stale entries are dropped on
        the way."""
        best: tuple[SortKey, Group] | None = None
        limited = tree.lending_limited
        root = tree.root
        for fr, index in list(tree.by_need.items()):
            amounts = index.amounts
            bound = self._bound(tree, fr) if fr in limited else root.subtree.get(fr, 0) - root.usage.get(fr, 0)
            stop = bisect.bisect_right(amounts, bound)
            position = 0
            while position < stop:
                bucket = index.buckets[amounts[position]]
                top = self._valid_top(bucket)
                if top is None:
                    index.drop(position)
                    stop -= 1
                    continue
                if best is None or top[0] < best[0]:
                    best = top
                position += 1
            if not amounts:
                del tree.by_need[fr]
        return best

    def _valid_top(self, bucket: list[tuple[SortKey, int, int, Group]]) -> tuple[SortKey, Group] | None:
        while bucket:
            key, _, need_epoch, group = bucket[0]
            if need_epoch == group.need_epoch:
                head = group.head(self.records)
                if head is None:
                    self._wake(group)
                elif head.sort_key == key:
                    return key, group
                else:  # its head left: re-sort it under the new one
                    heapq.heapreplace(bucket, (head.sort_key, next(self.sequence), need_epoch, group))
                    continue
            heapq.heappop(bucket)
        return None

    def wake_if_needs_available(self, tree: Tree, group: Group) -> None:
        """Wake a group from the need index if what it needs is available to its queue; else it awaits the next
        free (in its tree, or in its own queue where only that can help)."""
        head = group.head(self.records)
        if head is not None and self._may_succeed(group, head, ceiling=False):
            self._wake(group)
            return
        group.need_epoch += 1
        if head is not None and not self._may_succeed(group, head, ceiling=True):
            # Until its own queue frees quota its usage only grows, so no free elsewhere can let it succeed.
            queue = group.queue
            awaiting = queue.awaiting_own_free
            awaiting.append((group.need_epoch, group))
            # Outdated entries leave at the queue's next free; drop them in bulk if that is long in coming.
            if len(awaiting) > queue.awaiting_own_free_compact_at:
                awaiting[:] = [entry for entry in awaiting if entry[0] == entry[1].need_epoch]
                queue.awaiting_own_free_compact_at = max(COMPACT_FLOOR, 2 * len(awaiting))
        else:
            tree.awaiting_free.append((group.need_epoch, group))

    def _wake(self, group: Group) -> None:
        """Take a set-aside group out of every index it waits in and offer its head again (or unblock its
        StrictFIFO queue)."""
        tree = self.trees[group.queue.root]
        tree.set_aside.pop(id(group), None)
        tree.any_free.pop(id(group), None)
        tree.reclaimers.pop(id(group), None)
        tree.any_admission_waiters.pop(id(group), None)
        group.queue.own_waiters.pop(id(group), None)
        group.queue.capped.pop(id(group), None)
        self._forget_topology_wait(group)
        group.epoch += 1
        group.need_epoch += 1
        if group.set_aside:
            group.set_aside = False
            head = group.head(self.records)
            if head is not None:
                group.queue.push(group, head)
        else:  # the head of a blocked StrictFIFO queue
            queue = group.queue
            queue.blocked = None
            peeked = queue.peek(self.records)
            if peeked is not None:
                queue.offer(peeked[1])
        self.dirty.add(group.queue.root)

    def _wake_all(self, root: str) -> None:
        tree = self.trees[root]
        for group in list(tree.set_aside.values()):
            self._wake(group)
        tree.awaiting_free.clear()
        tree.by_need.clear()
        for name in tree.queues:
            self.queues[name].reclaim_waiting.clear()
            self.queues[name].reclaim_compact_at.clear()
            self.queues[name].awaiting_own_free.clear()
        self.dirty.add(root)

    def _forget_topology_wait(self, group: Group) -> None:
        for flavor in group.wake_conditions.topology_flavors:
            waiting = self._topology_waiters.get(flavor)
            if waiting is not None:
                waiting.pop(id(group), None)

    def wake_on_topology_free(self, flavors: tuple[str, ...]) -> None:
        """Capacity was freed on the nodes of ``flavors``: wake the set-aside heads waiting for it, in every tree."""
        for flavor in flavors:
            waiting = self._topology_waiters.get(flavor)
            if waiting:
                for group in list(waiting.values()):
                    self._wake(group)

    def wake_on_free(self, queue: Queue, freed: Mapping[FlavorResource, int]) -> None:
        """Quota was freed in ``queue``: wake the set-aside heads it could help; the others stay set aside."""
        tree = self.trees[queue.root]
        if tree.any_free or queue.capped:  # seldom: skip building the tuple
            for group in (*tree.any_free.values(), *queue.capped.values()):
                self._wake(group)
        if queue.awaiting_own_free:
            # Those that would still not fit (even with nothing else in use) keep awaiting a free here.
            awaiting = []
            for need_epoch, group in queue.awaiting_own_free:
                if need_epoch != group.need_epoch:
                    continue
                head = group.head(self.records)
                if head is not None and not self._may_succeed(group, head, ceiling=True):
                    awaiting.append((need_epoch, group))
                else:
                    tree.awaiting_free.append((need_epoch, group))
            queue.awaiting_own_free = awaiting
        if tree.awaiting_free:
            for need_epoch, group in tree.awaiting_free:
                if need_epoch == group.need_epoch:
                    self._index_by_need(tree, group)
            tree.awaiting_free.clear()
        if queue.reclaim_waiting:
            node = self.tree.cluster_queues[queue.model.name]
            for fr in freed:
                limited = queue.reclaim_waiting.get(fr)
                if limited:
                    usage = node.usage.get(fr, 0)
                    while limited and -limited[0][0] >= usage:
                        _, _, epoch, group = heapq.heappop(limited)
                        if epoch == group.epoch:
                            self._wake(group)
        self.dirty.add(queue.root)

    def wake_preemptors(self, queue: Queue, admitted: AdmittedWorkload) -> None:
        """Wake set-aside groups that could preempt the workload just admitted; nothing else can help them."""
        tree = self.trees[queue.root]
        if tree.any_admission_waiters:
            for group in list(tree.any_admission_waiters.values()):
                self._wake(group)
        if not (queue.own_waiters or tree.reclaimers):
            return
        fair = self.configuration.fair_sharing is not None
        priority = admitted.workload.priority
        if queue.own_waiters:
            newer_equal = (
                queue.model.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
            )
            for group in list(queue.own_waiters.values()):
                head_priority = group.shape[2]
                assert isinstance(head_priority, int)
                if fair or priority < head_priority or (newer_equal and priority == head_priority):
                    self._wake(group)
        if not tree.reclaimers:
            return
        if not (fair or self.tree.is_borrowing(queue.model.name, admitted.assignment.usage)):
            return
        for group in list(tree.reclaimers.values()):
            owner = group.queue
            if owner is queue:
                continue
            head_priority = group.shape[2]
            assert isinstance(head_priority, int)
            any_priority = owner.model.preemption.reclaim_within_cohort is ReclaimPolicy.ANY
            if fair or any_priority or priority < head_priority:
                self._wake(group)
