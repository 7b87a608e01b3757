"""The quota engine: Kueue v1beta2 admission semantics as a pure, deterministic library.

No I/O, no clock, no globals: objects in, decisions out. The controller (issue 4) and ``kuota simulate`` are
thin shells over it, so what the simulator predicts is what the cluster does.

What goes in
------------
- Configuration objects, decoded from YAML/JSON and parsed once::

      obj = parse_object(decoded_dict)          # ResourceFlavor, ClusterQueue, LocalQueue, Cohort,
      engine.apply(obj)                         # WorkloadPriorityClass, AdmissionCheck, v1 Namespace, Configuration
      engine.delete_object("ClusterQueue", "research")

  ``parse_<kind>(obj)`` raises ``InvalidObjectError`` (its ``.errors`` list every ``FieldError``);
  ``validate_<kind>(obj) -> list[FieldError]`` is the webhook's entry point and never raises. Messages follow
  the API server: ``spec.resourceGroups[0].flavors[1].resources[0].borrowingLimit: must be unset when
  cohortName is empty``. Unknown fields are errors. Quantities become exact integers: millicores for cpu,
  base units (bytes, devices) for everything else (``quantities``).
- Workloads (``model.Workload``: namespace, name, LocalQueue name, pod sets with per-pod requests in engine
  units, ``created`` seconds, uid, resolved ``priority``, ``max_execution_seconds``). ``parse_workload(obj,
  priorities)`` reads a ``Workload`` object; the simulator builds them from JSON Lines. Then::

      engine.submit(workload)       # new or changed pending workload (spec.active false deactivates)
      engine.finish(key)            # finished or deleted ("namespace/name"): quota freed, forgotten
      engine.evict(key, EvictionReason.PODS_READY_TIMEOUT, now)   # backoff 60 s * 2^(n-1), max 3600 s
      engine.evict(key, EvictionReason.ADMISSION_CHECK, now, requeue_at=t)  # or deactivate=True
      engine.restore_admitted(workload, cluster_queue, pod_set_assignments, admitted_at)  # after restart
      engine.submit(workload, evicted=(EvictionReason.PODS_READY_TIMEOUT, t))  # its Evicted condition read back
      engine.pods_ready(key, ready)  # an admitted workload's PodsReady, for waitForPodsReady's blockAdmission

What comes out
--------------
``engine.schedule(now, limit=None) -> list[Decision]``: every decision due at ``now``, in order:

- ``Eviction(workload, cluster_queue, reason, at, preempted_by, preemption_reason, requeue_at, deactivated)``
  for preemption victims (listed right before their preemptor's admission), workloads past
  ``maximumExecutionTimeSeconds`` (deactivated), and ``HoldAndDrain`` stop policies;
- ``Admission(workload, cluster_queue, pod_sets, borrowing, at, preempted)``: ``pod_sets`` carry, per pod
  set, the flavor of each resource, the admitted pod count (``minCount`` partial admission) and usage, and on
  a TAS flavor its ``topology`` (``TopologyAssignment``: the pods per domain).

Topology-aware scheduling: ``engine.apply(Topology)`` (``parse_object`` reads one), ``engine.apply_node(
TopologyNode)`` and ``engine.delete_node(name)`` (a node's labels, free capacity for TAS, taints, readiness),
``engine.apply_pod_usage(key, node, requests)`` and ``engine.delete_pod_usage(key)`` (a bound, unfinished pod that
is not a TAS pod: ``pod_requests`` reads its requests);
pod sets' ``topology_request`` (``topologyRequest``) say where their pods must go (``topology``).

Under ``blockAdmission``, while an admitted workload's pods are not reported ready, the head that would be admitted
next is held back instead (``engine.status(key).waiting_for_pods_ready``, Kueue's ``WaitingForPodsReady``); an
eviction by a PodsReady timeout (with ``requeuingStrategy.timestamp`` ``Eviction``) or by an AdmissionCheck queues
the workload from that eviction, as Kueue's queue order timestamp does.

``engine.next_wakeup()`` says when a time-driven decision (deadline, backoff end) falls due, so a shell can
wait until then. ``engine.status(key)`` gives a workload's state and, when not admitted, a reason a person
can act on ("namespace rogue is not selected by ClusterQueue research: ..."); ``inadmissible`` marks reasons
that waiting cannot cure. ``engine.cluster_queue_status(name)`` gives usage per flavor and resource (total,
borrowed, nominal), counts and the weighted fair share, for status and metrics.

Invariants
----------
- Deterministic: the same calls give the same decisions. Decisions take effect in the engine at once: a
  victim's quota is free for its preemptor, and an admitted workload counts until ``finish``/eviction.
  The controller applies them (evict victims, then unsuspend the preemptor once they are gone).
- Exactly the one-at-a-time rules (see ``scheduler``): one call admits many workloads, with the same outcome
  as ``schedule(now, limit=1)`` called repeatedly; usage never exceeds any quota or limit; nothing is
  admitted twice; preemption never evicts what the policy protects; a workload preempted at an instant does
  not preempt at that instant (no preemption cycles). The property tests check all of these against a naive
  reference scheduler.
- Cheap incremental updates: workload events cost O(log n + depth); configuration changes rebuild the
  state lazily, once, before the next decision. Only queue heads are tried; set-aside heads wait until
  freed quota could cover their shortfall or an admission gives them something to preempt.

Differences from Kueue, on purpose: many admissions per call from one snapshot (Kueue admits one per
ClusterQueue per cycle); heads across queues are ordered by priority then age (with fair sharing, by share
first) instead of "not borrowing first". Fair sharing follows Kueue's tournament over cohort levels
(``fair_sharing``); partial admission may preempt, as Kueue's reducer does (``scheduler``).

The other planes import the engine through this package only (``from kuota.engine import QuotaEngine``): its
modules are the engine's own business, free to move and split, and an import-linter ``protected`` contract keeps
them so. What a shell needs is exported here.
"""

from kuota.engine.decoding import (
    KUEUE_DEFAULTS,
    parse_cluster_queue,
    parse_cohort,
    parse_configuration,
    parse_local_queue,
    parse_namespace,
    parse_object,
    parse_required_node_affinity,
    parse_resource_flavor,
    parse_topology_request,
    parse_workload,
    parse_workload_priority_class,
    validate_cluster_queue,
    validate_cohort,
    validate_configuration,
    validate_local_queue,
    validate_namespace,
    validate_resource_flavor,
    validate_workload,
    validate_workload_priority_class,
)
from kuota.engine.errors import (
    EngineError,
    FieldError,
    InvalidObjectError,
    QuantityError,
    UnknownObjectError,
)
from kuota.engine.fair_sharing import (
    INFINITE_SHARE,
    weighted_share,
)
from kuota.engine.flavor_assignment import (
    PodSetAssignment,
)
from kuota.engine.model import (
    HOSTNAME_LABEL,
    AdmissionCheck,
    AdmissionCheckRule,
    ApiObject,
    ClusterQueue,
    Cohort,
    Configuration,
    LabelSelector,
    LocalQueue,
    Namespace,
    PodSet,
    Requirement,
    StopPolicy,
    Taint,
    TaintEffect,
    Toleration,
    Topology,
    TopologyNode,
    TopologyRequest,
    WaitForPodsReady,
    Workload,
    WorkloadPriorityClass,
)
from kuota.engine.node_reading import pod_requests, topology_node
from kuota.engine.preemption import (
    PreemptionReason,
)
from kuota.engine.quantities import (
    format_quantity,
    parse_amount,
    parse_quantity,
)
from kuota.engine.quota_engine import (
    Admission,
    ClusterQueueStatus,
    Decision,
    Eviction,
    EvictionReason,
    QuotaEngine,
    ResourceUsage,
    WorkloadState,
    WorkloadStatus,
)
from kuota.engine.topology import TopologyAssignment, pod_set_group_problem

__all__ = [
    "HOSTNAME_LABEL",
    "INFINITE_SHARE",
    "KUEUE_DEFAULTS",
    "Admission",
    "AdmissionCheck",
    "AdmissionCheckRule",
    "ApiObject",
    "ClusterQueue",
    "ClusterQueueStatus",
    "Cohort",
    "Configuration",
    "Decision",
    "EngineError",
    "Eviction",
    "EvictionReason",
    "FieldError",
    "InvalidObjectError",
    "LabelSelector",
    "LocalQueue",
    "Namespace",
    "PodSet",
    "PodSetAssignment",
    "PreemptionReason",
    "QuantityError",
    "QuotaEngine",
    "Requirement",
    "ResourceUsage",
    "StopPolicy",
    "Taint",
    "TaintEffect",
    "Toleration",
    "Topology",
    "TopologyAssignment",
    "TopologyNode",
    "TopologyRequest",
    "UnknownObjectError",
    "WaitForPodsReady",
    "Workload",
    "WorkloadPriorityClass",
    "WorkloadState",
    "WorkloadStatus",
    "format_quantity",
    "parse_amount",
    "parse_cluster_queue",
    "parse_cohort",
    "parse_configuration",
    "parse_local_queue",
    "parse_namespace",
    "parse_object",
    "parse_quantity",
    "parse_required_node_affinity",
    "parse_resource_flavor",
    "parse_topology_request",
    "parse_workload",
    "parse_workload_priority_class",
    "pod_requests",
    "pod_set_group_problem",
    "topology_node",
    "validate_cluster_queue",
    "validate_cohort",
    "validate_configuration",
    "validate_local_queue",
    "validate_namespace",
    "validate_resource_flavor",
    "validate_workload",
    "validate_workload_priority_class",
    "weighted_share",
]
