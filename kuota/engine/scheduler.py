"""The scheduling cycle: which pending heads are admitted, by fitting, by preempting or partially, and what is
evicted, at each instant the shell asks about.

Kueue's ``pkg/scheduler`` for this engine: it takes the heads ``queue_manager`` offers, assigns flavors
(``flavor_assignment``), picks victims (``preemption``, ``fair_sharing``), records every admission and eviction
in the state at once (a victim's quota is free for its preemptor) and hands a head that fails back to the
queue manager to set aside, with its wake conditions (what could make it admissible). It also keeps the
time-driven decisions: maximum execution time deadlines and PodsReady backoffs, and waitForPodsReady's
blockAdmission: while some admitted workload's pods are not ready (as its shell reports), the head that would be
admitted next is held back instead, waiting for them, and nothing else is admitted (Kueue's scheduler blocks
there). The rules are in docs/architecture.md (scheduler rules).

The rule the batching keeps exact: in each cohort tree, repeatedly admit the best-ordered pending workload that
can be admitted now (by fitting, by preempting, or partially); ``StrictFIFO`` queues offer only their head.
Best-ordered means highest priority, then oldest, then uid, except that a workload that would borrow gives way to
another queue's that would be admitted within its nominal quota (its victims gone), as Kueue's cycle sorts entries
that do not borrow first (a queue's candidate there is its first workload that can be admitted now); with fair
sharing, each cohort first prefers the child (ClusterQueue or Cohort) of lowest share with its candidate admitted,
as Kueue's tournament does (``fair_sharing``), a queue's candidate being its first workload in order not tried
since the last admission. Victims of a preemption free their quota at once and are requeued at once. Each cohort
tree is scheduled independently and only when something in it changed.
"""

from __future__ import annotations

import heapq

from kuota.engine.decisions import Admission, Decision, Eviction, EvictionReason, WorkloadState
from kuota.engine.fair_sharing import TournamentStep, fair_sharing_victims, path_shares, tournament_winner
from kuota.engine.flavor_assignment import Assignment, Mode, Possibility, PreemptionProbe, reduce_counts
from kuota.engine.model import (
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ReclaimPolicy,
    WithinClusterQueuePolicy,
    Workload,
)
from kuota.engine.preemption import (
    AdmittedWorkload,
    PreemptionReason,
    Target,
    classic_candidates_in_order,
    fewest_victims,
    nested_classic_victims,
)
from kuota.engine.queue_manager import QueueManager, may_preempt
from kuota.engine.queues import (
    Group,
    PendingReason,
    Queue,
    Record,
    SortKey,
    Tree,
    WakeConditions,
    orders_by_eviction,
)
from kuota.engine.quota_tree import FlavorResource
from kuota.engine.topology_admission import VictimCheck, with_pod_sets

# What admitting a workload now takes: its assignment (full, or cut toward minCount) and its victims.
Plan = tuple[Assignment, list[Target]]


class Scheduler:
    """Decides over the state of a ``QueueManager``, which it changes as it decides."""

    def __init__(self, manager: QueueManager) -> None:
        self.manager = manager
        self._backoffs: list[tuple[float, str]] = []  # (requeue_at, key): PodsReady backoffs ending
        self._deadlines: list[tuple[float, int, str]] = []  # (deadline, seq, key): maximum execution time

    def next_wakeup(self) -> float | None:
        """The earliest time at which ``schedule`` has something time-driven to do (backoff, deadline)."""
        times: list[float] = []
        while self._backoffs and self._backoff_stale(self._backoffs[0]):
            heapq.heappop(self._backoffs)
        while self._deadlines and self._deadline_stale(self._deadlines[0]):
            heapq.heappop(self._deadlines)
        if self._backoffs:
            times.append(self._backoffs[0][0])
        if self._deadlines:
            times.append(self._deadlines[0][0])
        return min(times) if times else None

    def schedule(self, now: float, limit: int | None = None) -> list[Decision]:
        """Every decision due at ``now``; with ``limit`` at most that many admissions (the rest stay due)."""
        decisions: list[Decision] = []
        self.manager.begin_instant(now)
        self.manager.pods_ready_waiter = None
        for key, reason in self.manager.drains:
            record = self.manager.records.get(key)
            if record is not None and record.state is WorkloadState.ADMITTED:
                decisions.append(self.evict(record, reason, now))
        self.manager.drains.clear()
        while self._deadlines and self._deadlines[0][0] <= now:
            entry = heapq.heappop(self._deadlines)
            if not self._deadline_stale(entry):
                decisions.append(
                    self.evict(self.manager.records[entry[2]], EvictionReason.DEACTIVATED, now, deactivate=True)
                )
        while self._backoffs and self._backoffs[0][0] <= now:
            backoff = heapq.heappop(self._backoffs)
            if not self._backoff_stale(backoff):
                record = self.manager.records[backoff[1]]
                record.state = WorkloadState.PENDING
                record.requeue_at = None
                self.manager.route(record)
        budget = [limit if limit is not None else -1]
        for root in sorted(self.manager.dirty):
            if budget[0] == 0 or self.manager.pods_ready_waiter is not None:
                break
            if self._run_tree(root, now, decisions, budget):
                self.manager.dirty.discard(root)
        return decisions

    def _run_tree(self, root: str, now: float, decisions: list[Decision], budget: list[int]) -> bool:
        """Admit in ``root``'s tree until nothing more can be; False if the admission budget ran out first."""
        tree = self.manager.trees[root]
        fair = self.manager.configuration.fair_sharing is not None
        queues = [self.manager.queues[name] for name in tree.queues] if fair else []
        step = TournamentStep()

        def shares_of(queue: Queue, record: Record) -> list[int]:
            return self._shares(queue, record, now)

        # The best group in the need index, as of its need epoch: a failed attempt changes no usage, so it stays
        # the best while its group waits on; an admission or a wake asks again.
        best_waiting: tuple[SortKey, Group] | None = None
        best_waiting_epoch: int | None = None
        drained: set[str] = set()  # the queues whose set-aside heads a borrower's rivals were woken from
        while True:
            if fair:  # shares, not age, order the heads: every group in the need index that may fit now competes
                while tree.by_need and (woken := self.manager.best_by_need(tree)) is not None:
                    self.manager.wake_if_needs_available(tree, woken[1])
            best: tuple[tuple[int, SortKey], Queue, Group, Record] | None = None
            if fair:
                winner = tournament_winner(
                    tree, queues, records=self.manager.records, quota=self.manager.tree, step=step, shares_of=shares_of
                )
                if winner is not None:
                    best = ((winner.shares[-1], winner.head.sort_key), winner.queue, winner.group, winner.head)
            else:
                found = self._best_head(tree)
                if found is not None:
                    best = ((0, found[2].sort_key), *found)
            if tree.by_need and not fair:
                if best_waiting_epoch is None or (
                    best_waiting is not None and best_waiting[1].need_epoch != best_waiting_epoch
                ):
                    best_waiting = self.manager.best_by_need(tree)
                    best_waiting_epoch = -1 if best_waiting is None else best_waiting[1].need_epoch
                if best_waiting is not None and (best is None or best_waiting[0] < best[0][1]):
                    self.manager.wake_if_needs_available(tree, best_waiting[1])
                    best_waiting_epoch = None
                    continue
            if best is None:
                return True
            if budget[0] == 0:
                return False
            _, queue, group, head = best
            assignment = self._assign(queue, head, now)
            plan = self._plan(queue, head, assignment, now)
            if not fair and plan is not None and self._borrows(queue, plan):
                lender = self._within_nominal_head(tree, queue, now, drained=drained)
                if lender is not None:
                    queue, group, head, assignment, plan = lender
            wake_conditions = self._attempt(queue, head, assignment, plan, now=now, decisions=decisions)
            if self.manager.pods_ready_waiter is not None:
                return False  # held back: tried again once the admitted workloads' pods are ready
            if wake_conditions is None:
                best_waiting_epoch = None
                budget[0] -= 1
                if plan is not None and plan[1]:
                    drained.clear()  # its victims' quota is free: what could not fit before may fit now
                if fair:
                    step = TournamentStep()
                continue
            self.manager.set_aside(tree, queue, group, head, wake_conditions)
            if fair:
                step.passed.add(head.workload.key)
                step.ordered.clear()  # set aside, the group may have taken in a younger one's members

    def _best_head(self, tree: Tree) -> tuple[Queue, Group, Record] | None:
        heads = tree.heads
        while heads:
            key, _, queue = heads[0]
            if queue.blocked is None:
                peeked = queue.peek(self.manager.records)
                if peeked is not None:
                    if peeked[1].sort_key == key:
                        return queue, peeked[0], peeked[1]
                    queue.offers += 1
                    heapq.heapreplace(heads, (peeked[1].sort_key, queue.offers, queue))
                    continue
            heapq.heappop(heads)
        return None

    def _within_nominal_head(
        self, tree: Tree, borrower: Queue, now: float, *, drained: set[str]
    ) -> tuple[Queue, Group, Record, Assignment, Plan] | None:
        """The best-ordered candidate of another queue that would be admitted within its nominal quota (its
        victims gone), with its assignment and plan: Kueue's cycle takes every entry that does not borrow before
        any that does, so a lender's workload is not left to reclaim what a borrower took at the same instant. A
        queue's candidate is its first workload that can be admitted now: heads that cannot are set aside on the
        way, as an attempt would."""
        records = self.manager.records
        nodes = self.manager.tree.cluster_queues
        # A set-aside head of another queue with nominal quota to spare competes too, as every ClusterQueue's head
        # does in Kueue's cycle: without this, the borrower taking a free would win by being the one the need index
        # offered first. Once per queue (``drained``) until a preemption frees quota: admissions only take quota, so
        # what could not fit then cannot now; the borrower's own queue is not looked at, so a later borrower's
        # rivals include it.
        for name in tree.queues:
            other = self.manager.queues[name]
            if other is borrower or name in drained:
                continue
            drained.add(name)
            node = nodes[name]
            if all(node.usage.get(fr, 0) >= quota for fr, quota in node.subtree.items()):
                continue
            for group in list(other.groups.values()):
                if group.set_aside and group.wake_conditions.needs is not None:
                    self.manager.wake_if_needs_available(tree, group)
        candidates: list[tuple[SortKey, Queue, Group, Record, Assignment, Plan]] = []
        for name in tree.queues:
            queue = self.manager.queues[name]
            if queue is borrower or queue.assigner is None:
                continue
            node = nodes[name]
            usage = node.usage
            if queue.model.preemption.within_cluster_queue is WithinClusterQueuePolicy.NEVER and all(
                usage.get(fr, 0) >= quota for fr, quota in node.subtree.items()
            ):
                continue  # whatever its candidate asks, it borrows
            while queue.blocked is None and (peeked := queue.peek(records)) is not None:
                group, head = peeked
                assignment = self._assign(queue, head, now)
                plan = self._plan(queue, head, assignment, now)
                if plan is None:
                    wake_conditions = self._wake_conditions(queue, head, assignment, now)
                    self.manager.set_aside(tree, queue, group, head, wake_conditions)
                    continue
                if not self._borrows(queue, plan):
                    candidates.append((head.sort_key, queue, group, head, assignment, plan))
                break
        if not candidates:
            return None
        _, queue, group, head, assignment, plan = min(candidates, key=_sort_key_of)
        return queue, group, head, assignment, plan

    def _borrows(self, queue: Queue, plan: Plan) -> bool:
        """Whether admitting by ``plan`` borrows, decided with its victims gone (as Kueue's preemption oracle
        decides it, and as ``admit`` flags it)."""
        assignment, victims = plan
        name = queue.model.name
        freed: dict[FlavorResource, int] = {}
        for target in victims:
            if target.victim.cluster_queue == name:
                for fr, amount in target.victim.assignment.usage.items():
                    freed[fr] = freed.get(fr, 0) + amount
        node = self.manager.tree.cluster_queues[name]
        usage, subtree = node.usage, node.subtree
        return any(
            usage.get(fr, 0) - freed.get(fr, 0) + amount > subtree.get(fr, 0) for fr, amount in assignment.usage.items()
        )

    def _assign(self, queue: Queue, record: Record, now: float) -> Assignment:
        """``record``'s assignment in full, as things stand."""
        assert queue.assigner is not None
        workload = record.workload
        assignment = queue.assigner.assign(workload.pod_sets, record.counts, self._probe(queue, record, now))
        topology = self.manager.topology
        if topology.uses_topology(queue.model):
            assignment = topology.settle(queue.model, workload, assignment)
        return assignment

    def _shares(self, queue: Queue, record: Record, now: float) -> list[int]:
        """The shares along its path of ``queue`` (and its cohorts) with ``record`` admitted in full."""
        assert queue.assigner is not None
        pod_sets = record.workload.pod_sets
        assignment = queue.assigner.assign(pod_sets, tuple(p.count for p in pod_sets), self._probe(queue, record, now))
        return path_shares(self.manager.tree, self.manager.tree.cluster_queues[queue.model.name], assignment.usage)

    def _attempt(
        self,
        queue: Queue,
        record: Record,
        assignment: Assignment,
        plan: Plan | None,
        *,
        now: float,
        decisions: list[Decision],
    ) -> WakeConditions | None:
        """Admit ``record`` by its ``plan`` (None: it cannot be admitted now; ``assignment`` is its full one), or
        hold it back for blockAdmission (None); otherwise say what could change that."""
        if plan is not None:
            self._preempt_and_admit(queue, record, *plan, now=now, decisions=decisions)
            return None
        return self._wake_conditions(queue, record, assignment, now)

    def _wake_conditions(self, queue: Queue, record: Record, assignment: Assignment, now: float) -> WakeConditions:
        """What could make ``record``, which cannot be admitted now, admissible; sets its pending reason."""
        workload = record.workload
        fair = self.manager.configuration.fair_sharing is not None
        placing = self.manager.topology.uses_topology(queue.model)
        just_preempted = record.preempted_at == now
        # Preemption leaves the tree as it found it, so this holds after a failed search too.
        conditions = self._preemption_wake_conditions(queue.model, assignment)
        victims_possible = assignment.mode is Mode.PREEMPT and (
            just_preempted or self._has_candidates(queue, record, conditions)
        )
        reasons = list(assignment.reasons)
        may_preempt_smaller = record.partial and may_preempt(queue.model, fair)
        if just_preempted and (assignment.mode is Mode.PREEMPT or may_preempt_smaller):
            reasons.append("it was itself preempted at this instant, so it may preempt others only later")
            if record.group is not None:
                self.manager.wake_next_instant.append(record.group)
        if assignment.mode is Mode.PREEMPT and may_preempt(queue.model, fair):
            reasons.append("preempting what the ClusterQueue's preemption policy allows would not free enough")
        record.reason = PendingReason(tuple(reasons))
        record.inadmissible = assignment.never_fits
        # Freed quota can only help once what it needs is available, unless preemption or a partial admission
        # could use a smaller amount (then any free may help).
        simple = (
            not victims_possible
            and len(workload.pod_sets) == 1
            and workload.pod_sets[0].min_count is None
            and assignment.short_needs
        )
        if simple:
            conditions = WakeConditions(
                conditions.own_queue, conditions.other_queues, assignment.short_needs, conditions.reclaim_limits
            )
        elif conditions.needs is None and not fair and self._capped(queue, record):
            conditions = WakeConditions(
                conditions.own_queue, conditions.other_queues, None, conditions.reclaim_limits, False, True
            )
        if may_preempt_smaller:
            # A smaller admission may preempt where the full one may not: any admission (a new candidate, a
            # new borrower, a share change) and any free may make one possible.
            conditions = WakeConditions(True, True, None, {}, True)
        tas_flavors = self.manager.topology.tas_flavors(queue.model) if placing else ()
        if assignment.topology_refused and not victims_possible:
            # Its quota fits: capacity freed on its flavors' nodes, in any tree, may place it. Quota freed or taken
            # in its tree matters only where the flavor walk may then choose other flavors; otherwise an admission
            # only takes capacity, and freed quota is not what it lacks.
            assert queue.assigner is not None
            chooses = queue.assigner.chooses_flavors
            conditions = WakeConditions(
                False, False, None if chooses else {}, conditions.reclaim_limits, chooses, topology_flavors=tas_flavors
            )
        elif (
            assignment.probed
            or self._nested(queue)
            or len(workload.pod_sets) > 1
            or (placing and may_preempt(queue.model, fair))
        ):
            # What preemption can find, and in a nested tree whether a subtree is over its quota, change with
            # any admission or free anywhere in the tree; so does where an earlier pod set goes, and with it
            # the room left for the later ones; and, for a TAS workload, whom preemption may pick and whether
            # the placement fits with them gone.
            conditions = WakeConditions(True, True, None, {}, True, topology_flavors=tas_flavors)
        elif assignment.mode is Mode.PREEMPT and queue.preemption_may_stop_walk:
            conditions = WakeConditions(
                conditions.own_queue,
                conditions.other_queues,
                conditions.needs,
                conditions.reclaim_limits,
                True,
                conditions.own_frees_only,
            )
        return conditions

    def _plan(self, queue: Queue, record: Record, assignment: Assignment, now: float) -> Plan | None:
        """What admitting ``record`` now takes: its full ``assignment`` (fitting, or with the victims the
        policy allows: a workload preempted at ``now`` may not preempt), else a partial admission; None if
        it cannot be admitted now."""
        if assignment.mode is Mode.FIT:
            return assignment, []
        placing = self.manager.topology.uses_topology(queue.model)
        if (
            assignment.mode is Mode.PREEMPT
            and record.preempted_at != now
            and self._has_candidates(queue, record, self._preemption_wake_conditions(queue.model, assignment))
        ):
            victims = self._victims(queue, record, assignment)
            if victims and placing:
                assignment, victims = self._placed_without(queue, record.workload, assignment, victims)
            if victims:
                return assignment, victims
        # kuota does not cut a workload placed by topology toward its minCount.
        return None if placing else self._partial(queue, record, now)

    def _placed_without(self, queue: Queue, workload: Workload, assignment: Assignment, victims: list[Target]) -> Plan:
        """The assignment placed with the victims' TAS usage gone, or no victims when it cannot be (Kueue checks
        the placement with each candidate it tries)."""
        topology = self.manager.topology
        for target in victims:
            topology.take(target.victim.workload.key)
        placed, _ = topology.place(queue.model, workload, assignment.pod_sets)
        for target in victims:
            topology.give_back(target.victim.workload.key)
        if placed is None:
            return assignment, []
        return with_pod_sets(assignment, placed), victims

    def _nested(self, queue: Queue) -> bool:
        """Whether ``queue``'s cohort tree nests cohorts."""
        return self.manager.tree.cluster_queues[queue.model.name].lineage[0].height >= 2

    def _probe(self, queue: Queue, record: Record, now: float) -> PreemptionProbe | None:
        """What preempting for one flavor and resource would do for ``record``, as Kueue's preemption oracle
        simulates it (a workload preempted at ``now`` may not preempt: then nothing is probed)."""
        if record.preempted_at == now or queue.assigner is None or not queue.assigner.chooses_flavors:
            return None
        tree = self.manager.tree
        name = queue.model.name
        node = tree.cluster_queues[name]

        def probe(fr: FlavorResource, need: int) -> tuple[Possibility, int]:
            trial = Assignment((), Mode.PREEMPT, False, {fr: need}, short=frozenset((fr,)))
            victims = (
                self._victims(queue, record, trial)
                if self._has_candidates(queue, record, self._preemption_wake_conditions(queue.model, trial))
                else []
            )
            if not victims:
                return Possibility.NOBODY, tree.lowest_fitting_subtree(node, fr, need)[0]
            for target in victims:
                tree.add_usage(target.victim.cluster_queue, target.victim.assignment.usage, -1)
            level = tree.lowest_fitting_subtree(node, fr, need)[0]
            for target in victims:
                tree.add_usage(target.victim.cluster_queue, target.victim.assignment.usage, 1)
            own = any(target.victim.cluster_queue == name for target in victims)
            return (Possibility.PREEMPT if own else Possibility.RECLAIM), level

        return probe

    def _capped(self, queue: Queue, record: Record) -> bool:
        """Whether its queue's borrowingLimit keeps ``record`` from fitting in every flavor of some resource
        group, even after preempting everything it may in that queue (other queues cannot change that)."""
        group = record.group
        pod_sets = record.workload.pod_sets
        node = self.manager.tree.cluster_queues[queue.model.name]
        if not node.borrow_caps or group is None or len(pod_sets) != 1 or pod_sets[0].min_count is not None:
            return False
        options, _ = self.manager.prepare(group, record)
        within = queue.model.preemption.within_cluster_queue
        priority = record.workload.priority

        def most(fr: FlavorResource) -> int | None:
            cap = node.borrow_caps.get(fr)
            if cap is None:
                return None
            own = (
                0
                if within is WithinClusterQueuePolicy.NEVER
                else queue.by_priority.usage_up_to(
                    priority, fr, inclusive=within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                )
            )
            usage = node.usage.get(fr, 0) - own
            floor = node.floors.get(fr, 0)
            return (floor - usage if usage < floor else 0) + cap - (usage - floor if usage > floor else 0)

        def short(fr: FlavorResource, need: int) -> bool:
            limit = most(fr)
            return limit is not None and need > limit

        return any(all(any(short(fr, need) for fr, need in flavor) for flavor in flavors) for flavors in options)

    def _preemption_wake_conditions(self, cq: ClusterQueue, assignment: Assignment) -> WakeConditions:
        """Which admissions could give a workload that needs preemption something to preempt."""
        if assignment.mode is not Mode.PREEMPT:
            return WakeConditions(False, False)
        if self.manager.configuration.fair_sharing is not None:
            return WakeConditions(True, True)
        preemption = cq.preemption
        node = self.manager.tree.cluster_queues[cq.name]
        usage = node.usage
        subtree = node.subtree
        wanted = assignment.usage
        within_nominal = True
        for fr in assignment.short:
            if usage.get(fr, 0) + wanted[fr] > subtree.get(fr, 0):
                within_nominal = False
                break
        may_reclaim = cq.cohort is not None and preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER
        reclaims = (
            (within_nominal and may_reclaim)
            or (cq.cohort is not None and preemption.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER)
            or (may_reclaim and node.lineage[0].height >= 2)  # the advantage of a sub-cohort's quota
        )
        limits: dict[FlavorResource, int] = {}
        if may_reclaim and not within_nominal:
            for fr in assignment.short:
                limit = node.subtree.get(fr, 0) - assignment.usage[fr]
                if 0 <= limit < node.usage.get(fr, 0):
                    limits[fr] = limit
        own = preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
        return WakeConditions(own, reclaims, None, limits)

    def _has_candidates(self, queue: Queue, record: Record, conditions: WakeConditions) -> bool:
        """Cheap test: could any admitted workload be a candidate at all (spares scanning them when not)?"""
        if conditions.other_queues:
            return True
        lowest = queue.by_priority.lowest()
        within = queue.model.preemption.within_cluster_queue
        newer_equal = within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        priority = record.workload.priority
        return (
            conditions.own_queue and lowest is not None and (lowest < priority or (newer_equal and lowest == priority))
        )

    def _victims(self, queue: Queue, record: Record, assignment: Assignment) -> list[Target]:
        cq = queue.model
        fair = self.manager.configuration.fair_sharing
        cohort_queues = self.manager.trees[queue.root].queues
        # Every path takes victims until the placement fits too; a flavor walk's probe (no pod sets yet) asks
        # about quota alone.
        check = None
        if assignment.pod_sets and self.manager.topology.uses_topology(cq):
            check = VictimCheck(self.manager.topology, cq, record.workload, assignment)
        if fair is None and self._nested(queue):
            return nested_classic_victims(
                record.workload,
                cq,
                assignment,
                tree=self.manager.tree,
                admitted={name: self.manager.queues[name].admitted for name in cohort_queues},
                preemptor_order_time=record.order_time,
                topology=check,
            )
        if fair is None:
            ordered = classic_candidates_in_order(
                record.workload,
                cq,
                assignment,
                tree=self.manager.tree,
                admitted={name: self.manager.queues[name].by_priority for name in cohort_queues},
                cohort_queues=cohort_queues,
                preemptor_order_time=record.order_time,
            )
            return fewest_victims(
                cq.name, assignment.usage, assignment.short, ordered, self.manager.tree, topology=check
            )
        return fair_sharing_victims(
            record.workload,
            cq,
            assignment,
            tree=self.manager.tree,
            admitted={name: self.manager.queues[name].admitted for name in cohort_queues},
            cohort_queues=cohort_queues,
            strategies=fair.preemption_strategies,
            preemptor_order_time=record.order_time,
            topology=check,
        )

    def _partial(self, queue: Queue, record: Record, now: float) -> Plan | None:
        """The admission Kueue's reducer settles on with pod sets cut toward their minCount
        (``reduce_counts``): one that fits, or one that fits once victims the policy allows are preempted (a
        workload preempted at this instant may not preempt)."""
        assert queue.assigner is not None
        if not record.partial:
            return None
        assigner = queue.assigner
        pod_sets = record.workload.pod_sets
        free_to_preempt = record.preempted_at != now
        probe = self._probe(queue, record, now)

        def admissible(counts: tuple[int, ...]) -> tuple[Assignment, list[Target]] | None:
            attempt = assigner.assign(pod_sets, counts, probe)
            if attempt.mode is Mode.FIT:
                return attempt, []
            if (
                attempt.mode is Mode.PREEMPT
                and free_to_preempt
                and self._has_candidates(queue, record, self._preemption_wake_conditions(queue.model, attempt))
            ):
                victims = self._victims(queue, record, attempt)
                if victims:
                    return attempt, victims
            return None

        return reduce_counts(pod_sets, admissible)

    def _preempt_and_admit(
        self,
        queue: Queue,
        record: Record,
        assignment: Assignment,
        victims: list[Target],
        *,
        now: float,
        decisions: list[Decision],
    ) -> None:
        """Evict ``victims`` and admit ``record``; under blockAdmission, while some admitted workload's pods are not
        ready, neither: ``record`` is held back until they are (Kueue's scheduler waits there before it admits; a
        preemption is decided here with its admission, so its victims run on meanwhile)."""
        if self.manager.not_ready:
            self.manager.pods_ready_waiter = record.workload.key
            return
        for target in victims:
            victim = self.manager.records[target.victim.workload.key]
            victim.preempted_at = now
            decisions.append(
                self.evict(
                    victim,
                    EvictionReason.PREEMPTED,
                    now,
                    preempted_by=record.workload.key,
                    preemption_reason=target.reason,
                )
            )
        decisions.append(
            self.admit(record, queue.model.name, assignment, now, tuple(t.victim.workload.key for t in victims))
        )

    def admit(
        self, record: Record, cluster_queue: str, assignment: Assignment, now: float, preempted: tuple[str, ...] = ()
    ) -> Admission:
        queue = self.manager.queues[cluster_queue]
        node = self.manager.tree.cluster_queues[cluster_queue]
        borrowing = assignment.borrowing
        if preempted:
            # Borrowing is decided with the victims gone: within its nominal quota then, it does not borrow.
            borrowing = any(
                node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0) for fr, amount in assignment.usage.items()
            )
        self.manager.unroute(record)
        record.state = WorkloadState.ADMITTED
        record.reason = None
        record.queue = queue
        admitted = AdmittedWorkload(record.workload, cluster_queue, assignment, now, next(self.manager.sequence))
        record.admitted = admitted
        queue.admitted[record.workload.key] = admitted
        queue.by_priority.add(admitted)
        self.manager.tree.add_usage(cluster_queue, assignment.usage, 1)
        self.manager.topology.hold(record.workload.key, record.workload, assignment.pod_sets)
        if self.manager.blocks_admission:
            self.manager.not_ready.add(record.workload.key)
        limit = record.workload.max_execution_seconds
        if limit is not None:
            record.deadline = now + max(0.0, limit - record.executed)
            heapq.heappush(self._deadlines, (record.deadline, next(self.manager.sequence), record.workload.key))
        self.manager.wake_preemptors(queue, admitted)
        return Admission(record.workload.key, cluster_queue, assignment.pod_sets, borrowing, now, preempted)

    def release(self, record: Record, now: float | None = None) -> AdmittedWorkload:
        admitted = record.admitted
        assert admitted is not None
        queue = self.manager.queues.get(admitted.cluster_queue)
        if queue is not None and queue.admitted.pop(record.workload.key, None) is not None:
            queue.by_priority.remove(admitted)
            self.manager.tree.add_usage(admitted.cluster_queue, admitted.assignment.usage, -1)
            self.manager.wake_on_free(queue, admitted.assignment.usage)
        freed = self.manager.topology.release(record.workload.key)
        if freed:
            self.manager.wake_on_topology_free(freed)
        if now is not None:
            record.executed += max(0.0, now - admitted.admitted_at)
        if self.manager.blocks_admission:
            self.manager.not_ready.discard(record.workload.key)
        record.admitted = None
        record.deadline = None
        record.queue = None
        return admitted

    def evict(
        self,
        record: Record,
        reason: EvictionReason,
        now: float | None,
        *,
        preempted_by: str | None = None,
        preemption_reason: PreemptionReason | None = None,
        deactivate: bool = False,
        requeue_at: float | None = None,
    ) -> Eviction:
        """Evict an admitted workload: requeued (at ``requeue_at``, or after the PodsReady backoff; ordered from
        now on by this eviction where Kueue's queue order timestamp says so), or deactivated."""
        at = 0.0 if now is None else now
        admitted = self.release(record, now)
        wait = self.manager.configuration.wait_for_pods_ready
        if reason is EvictionReason.PODS_READY_TIMEOUT and wait is not None:
            record.requeue_count += 1
            if wait.backoff_limit_count is not None and record.requeue_count > wait.backoff_limit_count:
                deactivate = True
            else:
                delay = min(wait.backoff_base_seconds * 2 ** (record.requeue_count - 1), wait.backoff_max_seconds)
                requeue_at = at + delay
        if not deactivate and orders_by_eviction(reason, wait):
            record.queue_from(at)
        if deactivate:
            record.state = WorkloadState.DEACTIVATED
            record.reason = (
                "deactivated: it ran past maximumExecutionTimeSeconds"
                if reason is EvictionReason.DEACTIVATED
                else f"deactivated after {reason.value}"
            )
        elif requeue_at is not None:
            record.state = WorkloadState.BACKOFF
            record.requeue_at = requeue_at
            if reason is EvictionReason.ADMISSION_CHECK:
                record.reason = f"an AdmissionCheck asked to retry; requeued at {requeue_at:g}"
            heapq.heappush(self._backoffs, (requeue_at, record.workload.key))
        else:
            record.state = WorkloadState.PENDING
            self.manager.route(record)
        return Eviction(
            record.workload.key,
            admitted.cluster_queue,
            reason,
            at,
            preempted_by,
            preemption_reason,
            requeue_at,
            deactivate,
        )

    def back_off(self, record: Record, requeue_at: float) -> None:
        """Keep a workload (taken out of its queue) out of every queue until ``requeue_at``."""
        record.state = WorkloadState.BACKOFF
        record.requeue_at = requeue_at
        heapq.heappush(self._backoffs, (requeue_at, record.workload.key))

    def _backoff_stale(self, entry: tuple[float, str]) -> bool:
        record = self.manager.records.get(entry[1])
        return record is None or record.state is not WorkloadState.BACKOFF or record.requeue_at != entry[0]

    def _deadline_stale(self, entry: tuple[float, int, str]) -> bool:
        record = self.manager.records.get(entry[2])
        return record is None or record.state is not WorkloadState.ADMITTED or record.deadline != entry[0]


def _sort_key_of(entry: tuple[SortKey, Queue, Group, Record, Assignment, Plan]) -> SortKey:
    return entry[0]
