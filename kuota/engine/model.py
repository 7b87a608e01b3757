"""Typed, frozen models of the API objects the engine decides over, with quantities as exact integers.

These are what ``decoding`` produces from decoded YAML/JSON; nothing deeper in the engine ever looks at a
raw dict or a quantity string. Names follow Kueue's v1beta2 fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Final


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class WhenCanBorrow(StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class WhenCanPreempt(StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class ReclaimPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class WithinClusterQueuePolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class BorrowWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FairSharingStrategy(StrEnum):
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_TOPOLOGY_LEVELS = 16


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: TaintEffect | None
    # tolerationSeconds: a NoExecute taint is tolerated only that long (None: for ever).
    seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key == "":
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist; in node affinity also Gt, Lt
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        # Gt, Lt: the node's label and the one value compare as integers; a label that is not one never matches.
        label = labels.get(self.key)
        try:
            have, bound = int(label or ""), int(self.values[0])
        except ValueError:
            return False
        return have > bound if self.operator == "Gt" else have < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector; the empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match_labels) and all(
            requirement.matches(labels) for requirement in self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource of one flavor: nominal quota and the optional limits, in engine units."""

    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    reclaim_within_cohort: ReclaimPolicy = ReclaimPolicy.NEVER
    within_cluster_queue: WithinClusterQueuePolicy = WithinClusterQueuePolicy.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: WhenCanBorrow = WhenCanBorrow.MAY_STOP_SEARCH
    when_can_preempt: WhenCanPreempt = WhenCanPreempt.TRY_NEXT_FLAVOR


@dataclass(frozen=True, slots=True)
class AdmissionCheckRule:
    """One entry of a ClusterQueue's ``admissionChecksStrategy``: the check, and the flavors it runs for (empty:
    every flavor of the queue)."""

    name: str
    on_flavors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    namespace_selector: LabelSelector | None = None  # None selects no namespace, as in Kueue
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    stop_policy: StopPolicy = StopPolicy.NONE
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: Preemption = Preemption()
    fair_weight: Fraction = Fraction(1)
    admission_checks: tuple[AdmissionCheckRule, ...] = ()

    def checks_for(self, admitted_flavors: Iterable[str]) -> list[str]:
        """The checks a workload admitted on ``admitted_flavors`` must pass, by name (Kueue's
        ``admissionChecksForAdmission``: a check runs when one of its ``onFlavors``, all the queue's when empty,
        was admitted)."""
        every_flavor = {flavor.name for group in self.resource_groups for flavor in group.flavors}
        admitted = set(admitted_flavors)
        return sorted(rule.name for rule in self.admission_checks if admitted & (set(rule.on_flavors) or every_flavor))


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    """An AdmissionCheck: a ClusterQueue naming one that is missing or not ``active`` (its controller has not set
    its ``Active`` condition True) admits nothing. What the check decides is its controller's business."""

    name: str
    controller_name: str
    active: bool = False


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: StopPolicy = StopPolicy.NONE


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Fraction = Fraction(1)


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int
    description: str = ""


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Topology:
    """A Topology: its levels' node labels, from the widest domain to the narrowest."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's ``topologyRequest`` (v1beta2): at most one of ``required``, ``preferred`` and
    ``unconstrained``; slices of ``slice_size`` pods each in one ``slice_level`` domain, or up to 3 layers of
    slices (``slice_layers``: level and size, the widest first; each size divides the one before), which then
    stand for ``slice_level`` and ``slice_size``; ``group``: its pod set group."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slice_level: str | None = None
    slice_size: int | None = None
    group: str | None = None
    slice_layers: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TopologyNode:
    """A node as placement sees it: ``free`` is its allocatable, in engine units (the bound pods that are not TAS
    pods are counted apart, each taking its requests and one of its ``pods``)."""

    name: str
    labels: Mapping[str, str]
    free: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` pods, each requesting ``requests`` (engine units); ``min_count`` allows partial admission."""

    name: str
    count: int
    requests: Mapping[str, int]
    min_count: int | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    # Required node affinity: nodeSelectorTerms (ORed), each its matchExpressions (ANDed); () when none.
    node_affinity: tuple[tuple[Requirement, ...], ...] = ()
    # Where its pods must go in the flavor's Topology; None: nowhere in particular, unless every flavor of
    # the ClusterQueue is a TAS flavor (then implied: unconstrained).
    topology_request: TopologyRequest | None = None


class Workload:
    """A unit of admission. ``created`` is seconds on the caller's clock; ``priority`` is already resolved.

    A plain class equal and hashed by value (``key`` aside), as the frozen dataclass it replaced: one is built
    per submitted workload, a million in a long replay (see ``setup.py``)."""

    __slots__ = (
        "active",
        "created",
        "key",
        "max_execution_seconds",
        "name",
        "namespace",
        "pod_sets",
        "priority",
        "priority_class",
        "queue_name",
        "uid",
    )

    def __init__(  # noqa: PLR0917 (positional, as the dataclass it replaced was built)
        self,
        namespace: str,
        name: str,
        queue_name: str,
        pod_sets: tuple[PodSet, ...],
        created: float = 0.0,
        uid: str = "",
        priority: int = 0,
        priority_class: str | None = None,
        active: bool = True,
        max_execution_seconds: int | None = None,
    ) -> None:
        self.namespace: Final = namespace
        self.name: Final = name
        self.queue_name: Final = queue_name
        self.pod_sets: Final = pod_sets
        self.created: Final = created
        self.uid: Final = uid
        self.priority: Final = priority
        self.priority_class: Final = priority_class
        self.active: Final = active
        self.max_execution_seconds: Final = max_execution_seconds
        # "namespace/name", the engine's handle for it: asked for at every step, so built once.
        self.key: Final = f"{namespace}/{name}"

    def _fields(self) -> tuple[object, ...]:
        return (
            self.namespace,
            self.name,
            self.queue_name,
            self.pod_sets,
            self.created,
            self.uid,
            self.priority,
            self.priority_class,
            self.active,
            self.max_execution_seconds,
        )

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Workload) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Workload(namespace={self.namespace!r}, name={self.name!r}, queue_name={self.queue_name!r}, "
            f"pod_sets={self.pod_sets!r}, created={self.created!r}, uid={self.uid!r}, priority={self.priority!r}, "
            f"priority_class={self.priority_class!r}, active={self.active!r}, "
            f"max_execution_seconds={self.max_execution_seconds!r})"
        )


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    timeout_seconds: int = 1800
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    backoff_limit_count: int | None = None
    recovery_timeout_seconds: int | None = 1800  # None: recovery is not timed ("0s")
    block_admission: bool = False
    timestamp: str = "Eviction"  # requeuingStrategy.timestamp: Eviction or Creation


@dataclass(frozen=True, slots=True)
class FairSharing:
    preemption_strategies: tuple[FairSharingStrategy, ...] = (
        FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
    )


@dataclass(frozen=True, slots=True)
class Configuration:
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: LabelSelector | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None
    fair_sharing: FairSharing | None = None


ApiObject = (
    ResourceFlavor
    | ClusterQueue
    | LocalQueue
    | Cohort
    | WorkloadPriorityClass
    | Namespace
    | AdmissionCheck
    | Topology
    | Configuration
)
