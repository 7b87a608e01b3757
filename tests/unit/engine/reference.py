"""A deliberately naive reference scheduler for the property tests: the one-at-a-time rules, nothing cached.

Every step rebuilds the quota tree from scratch and tries the queues' heads, best first (a head found
unadmittable at this step gives way to the next workload of its queue, except in a StrictFIFO queue), until
one can be admitted now, evicting its victims. It shares the engine's pure building blocks (flavor
assignment, victim selection) but none of its bookkeeping: groups, set-aside heads, incremental usage, dirty trees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kuota.engine.fair_sharing import fair_sharing_victims, path_shares
from kuota.engine.flavor_assignment import (
    Assignment,
    FlavorAssigner,
    Mode,
    Possibility,
    PreemptionProbe,
    reduce_counts,
)
from kuota.engine.model import ClusterQueue, Cohort, Configuration, QueueingStrategy, ResourceFlavor, Workload
from kuota.engine.preemption import (
    AdmittedWorkload,
    Target,
    classic_candidates,
    minimal_victims,
    nested_classic_victims,
)
from kuota.engine.quota_engine import Admission, Decision, Eviction, EvictionReason
from kuota.engine.quota_tree import FlavorResource, QuotaTree


@dataclass
class ReferenceScheduler:
    flavors: dict[str, ResourceFlavor]
    cluster_queues: dict[str, ClusterQueue]
    cohorts: dict[str, Cohort]
    configuration: Configuration
    queue_of: dict[tuple[str, str], str]  # (namespace, LocalQueue) -> ClusterQueue

    def __post_init__(self) -> None:
        self.pending: dict[str, Workload] = {}
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.sequence = 0
        self.preempted_at: dict[str, float] = {}  # a workload preempted at an instant may not preempt at it

    def submit(self, workload: Workload) -> None:
        self.pending[workload.key] = workload

    def finish(self, key: str) -> None:
        self.pending.pop(key, None)
        self.admitted.pop(key, None)

    def _tree(self) -> QuotaTree:
        tree = QuotaTree(self.cluster_queues, self.cohorts)
        for admitted in self.admitted.values():
            tree.add_usage(admitted.cluster_queue, admitted.assignment.usage, 1)
        return tree

    def schedule(self, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        tree = self._tree()
        roots: dict[str, list[str]] = {}
        for name in sorted(self.cluster_queues):
            cq = self.cluster_queues[name]
            root = "cohort/" + tree.cluster_queues[name].root().name if cq.cohort else "queue/" + name
            roots.setdefault(root, []).append(name)
        for root in sorted(roots):
            while self._step(roots[root], now, decisions):
                pass
        return decisions

    def _heads(self, queues: list[str], failed: set[str]) -> list[tuple[str, Workload]]:
        """Each queue's first workload not yet found unadmittable at this step (StrictFIFO: its first, or none)."""
        heads: list[tuple[str, Workload]] = []
        for name in queues:
            mine = sorted(
                (w for w in self.pending.values() if self.queue_of[(w.namespace, w.queue_name)] == name),
                key=lambda w: (-w.priority, w.created, w.uid, w.key),
            )
            if self.cluster_queues[name].queueing_strategy is not QueueingStrategy.STRICT_FIFO:
                mine = [w for w in mine if w.key not in failed]
            if mine and mine[0].key not in failed:
                heads.append((name, mine[0]))
        return heads

    def _step(self, queues: list[str], now: float, decisions: list[Decision]) -> bool:
        tree = self._tree()
        fair = self.configuration.fair_sharing is not None

        def order(item: tuple[str, Workload]) -> tuple[int, float, str, str]:
            w = item[1]
            return -w.priority, w.created, w.uid, w.key

        def tournament(heads: list[tuple[str, Workload]]) -> tuple[str, Workload]:
            # Kueue's fair-sharing tournament, from the root down: each cohort keeps, among the children on its
            # heads' paths, the nominee whose share at that child (nominee counted in) is lowest, then best order.
            paths: dict[str, list[tuple[int, int]]] = {}  # per queue, root first: (node id, share with its head)
            for name, w in heads:
                node = tree.cluster_queues[name]
                probe = self._probe(name, w, tree, queues, now)
                usage = self._assigner(name, tree).assign(w.pod_sets, tuple(p.count for p in w.pod_sets), probe).usage
                shares = path_shares(tree, node, usage)
                paths[name] = [(id(n), share) for n, share in zip(reversed(node.upward), reversed(shares), strict=True)]

            def nominee(group: list[tuple[str, Workload]], depth: int) -> tuple[str, Workload]:
                if len(paths[group[0][0]]) == depth + 1:
                    return group[0]
                children: dict[int, list[tuple[str, Workload]]] = {}
                for item in group:
                    children.setdefault(paths[item[0]][depth + 1][0], []).append(item)
                winners = [nominee(below, depth + 1) for below in children.values()]
                return min(winners, key=lambda item: (paths[item[0]][depth + 1][1], order(item)))

            return nominee(heads, 0)  # the queues of one step share their root

        failed: set[str] = set()

        def candidate(queue: str) -> tuple[str, Workload] | None:
            """``queue``'s first workload that can be admitted now, if it would be within its nominal quota
            (victims gone); those before it that cannot be admitted give way."""
            while head := next((h for h in self._heads(queues, failed) if h[0] == queue), None):
                plan = self._plan(*head, tree, queues, now)
                if plan is not None:
                    return None if self._borrows(queue, plan) else head
                failed.add(head[1].key)
            return None

        while heads := self._heads(queues, failed):
            if fair:
                name, workload = tournament(heads)
            else:
                name, workload = min(heads, key=order)
                plan = self._plan(name, workload, tree, queues, now)
                if plan is not None and self._borrows(name, plan):
                    # Kueue's cycle order: a workload within its queue's nominal quota before one that borrows.
                    offered = (candidate(queue) for queue in queues if queue != name)
                    lenders = [item for item in offered if item is not None]
                    if lenders:
                        name, workload = min(lenders, key=order)
            if self._attempt(name, workload, tree, queues, now=now, decisions=decisions):
                return True
            failed.add(workload.key)
        return False

    def _assigner(self, name: str, tree: QuotaTree) -> FlavorAssigner:
        return FlavorAssigner(
            self.cluster_queues[name], tree, self.flavors, self.configuration.fair_sharing is not None
        )

    def _attempt(
        self,
        name: str,
        workload: Workload,
        tree: QuotaTree,
        queues: list[str],
        *,
        now: float,
        decisions: list[Decision],
    ) -> bool:
        plan = self._plan(name, workload, tree, queues, now)
        if plan is None:
            return False
        assignment, victims = plan
        for target in victims:
            victim = target.victim
            del self.admitted[victim.workload.key]
            self.preempted_at[victim.workload.key] = now
            self.pending[victim.workload.key] = victim.workload
            decisions.append(
                Eviction(
                    victim.workload.key,
                    victim.cluster_queue,
                    EvictionReason.PREEMPTED,
                    now,
                    workload.key,
                    target.reason,
                )
            )
        del self.pending[workload.key]
        # Borrowing is decided with the victims gone.
        node = self._tree().cluster_queues[name]
        borrowing = any(
            node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0) for fr, amount in assignment.usage.items()
        )
        self.sequence += 1
        self.admitted[workload.key] = AdmittedWorkload(workload, name, assignment, now, self.sequence)
        decisions.append(
            Admission(
                workload.key,
                name,
                assignment.pod_sets,
                borrowing,
                now,
                tuple(t.victim.workload.key for t in victims),
            )
        )
        return True

    def _plan(
        self, name: str, workload: Workload, tree: QuotaTree, queues: list[str], now: float
    ) -> tuple[Assignment, list[Target]] | None:
        """The assignment and victims admitting ``workload`` now takes, or None if it cannot be admitted now."""
        assigner = self._assigner(name, tree)
        may_preempt = self.preempted_at.get(workload.key) != now
        probe = self._probe(name, workload, tree, queues, now)
        assignment = assigner.assign(workload.pod_sets, tuple(p.count for p in workload.pod_sets), probe)
        victims = self._victims(name, workload, assignment, tree, queues) if may_preempt else []
        if assignment.mode is Mode.FIT or victims:
            return assignment, victims
        return self._partial(
            assigner,
            workload,
            lambda a: self._victims(name, workload, a, tree, queues) if may_preempt else [],
            probe,
        )

    def _borrows(self, name: str, plan: tuple[Assignment, list[Target]]) -> bool:
        """Whether admitting by ``plan`` borrows, with its victims gone."""
        assignment, victims = plan
        tree = self._tree()
        for target in victims:
            tree.add_usage(target.victim.cluster_queue, target.victim.assignment.usage, -1)
        node = tree.cluster_queues[name]
        return any(node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0) for fr, amount in assignment.usage.items())

    def _probe(
        self, name: str, workload: Workload, tree: QuotaTree, queues: list[str], now: float
    ) -> PreemptionProbe | None:
        """Kueue's preemption oracle for one flavor and resource: would victims be found, from whom, and how
        far up the tree would it borrow once they are gone."""
        if self.preempted_at.get(workload.key) == now:
            return None
        node = tree.cluster_queues[name]

        def probe(fr: FlavorResource, need: int) -> tuple[Possibility, int]:
            trial = Assignment((), Mode.PREEMPT, False, {fr: need}, short=frozenset((fr,)))
            victims = self._victims(name, workload, trial, tree, queues)
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

    def _victims(
        self, name: str, workload: Workload, assignment: Assignment, tree: QuotaTree, queues: list[str]
    ) -> list[Target]:
        if assignment.mode is not Mode.PREEMPT:
            return []
        admitted_by_queue: dict[str, dict[str, AdmittedWorkload]] = {q: {} for q in queues}
        for key, admitted in self.admitted.items():
            if admitted.cluster_queue in admitted_by_queue:
                admitted_by_queue[admitted.cluster_queue][key] = admitted
        fair = self.configuration.fair_sharing
        if fair is None and tree.cluster_queues[name].lineage[0].height >= 2:
            return nested_classic_victims(
                workload,
                self.cluster_queues[name],
                assignment,
                tree=tree,
                admitted=admitted_by_queue,
                preemptor_order_time=workload.created,
            )
        if fair is not None:
            return fair_sharing_victims(
                workload,
                self.cluster_queues[name],
                assignment,
                tree=tree,
                admitted=admitted_by_queue,
                cohort_queues=queues,
                strategies=fair.preemption_strategies,
                preemptor_order_time=workload.created,
            )
        candidates = classic_candidates(
            workload,
            self.cluster_queues[name],
            assignment,
            tree=tree,
            admitted=admitted_by_queue,
            cohort_queues=queues,
            preemptor_order_time=workload.created,
        )
        if not candidates:
            return []
        return minimal_victims(name, assignment.usage, assignment.short, candidates, tree)

    def _partial(
        self,
        assigner: FlavorAssigner,
        workload: Workload,
        victims_for: Callable[[Assignment], list[Target]],
        probe: PreemptionProbe | None,
    ) -> tuple[Assignment, list[Target]] | None:
        """Kueue's reducer over counts cut toward minCount: each probe fits, or fits once victims are preempted
        (victims_for gives none to a workload preempted at this instant)."""
        if all(p.min_count is None for p in workload.pod_sets):
            return None

        def admissible(counts: tuple[int, ...]) -> tuple[Assignment, list[Target]] | None:
            attempt = assigner.assign(workload.pod_sets, counts, probe)
            victims = [] if attempt.mode is Mode.FIT else victims_for(attempt)
            return (attempt, victims) if attempt.mode is Mode.FIT or victims else None

        return reduce_counts(workload.pod_sets, admissible)
