"""Parse, default and validate decoded ``kueue.x-k8s.io/v1beta2`` objects into the engine's models: one reader
per kind (ResourceFlavor, ClusterQueue, LocalQueue, Cohort, WorkloadPriorityClass, v1 Namespace, the
Configuration, Workload), written with the generic ``field_reader`` and the Kubernetes structures of
``kubernetes_fields``.

Every ``validate_<kind>(obj)`` returns the full list of ``FieldError`` (empty when valid) so the webhook can
reject an object with all its problems at once; every ``parse_<kind>(obj)`` returns the model or raises
``InvalidObjectError``. Unknown fields are errors: a misspelt ``borowingLimit`` silently dropped would give a
team unlimited borrowing. ``status`` is written by controllers and is not validated here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from fractions import Fraction
from typing import TypeVar

from kuota.engine.errors import FieldError, InvalidObjectError, show_value
from kuota.engine.field_reader import FieldReader, finish, object_name
from kuota.engine.kubernetes_fields import (
    read_label_selector,
    read_node_affinity,
    read_node_selector,
    read_pod_requests,
    read_tolerations,
)
from kuota.engine.model import (
    HOSTNAME_LABEL,
    MAX_TOPOLOGY_LEVELS,
    AdmissionCheck,
    AdmissionCheckRule,
    ApiObject,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Configuration,
    FairSharing,
    FairSharingStrategy,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    Namespace,
    PodSet,
    Preemption,
    QueueingStrategy,
    ReclaimPolicy,
    Requirement,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    TaintEffect,
    Topology,
    TopologyRequest,
    WaitForPodsReady,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
    Workload,
    WorkloadPriorityClass,
)
from kuota.engine.quantities import to_units

KUEUE_API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
_T = TypeVar("_T")


def _quota_units(resource: str, amount: Fraction | None) -> int | None:
    return None if amount is None else to_units(resource, amount)


def _resource_groups(reader: FieldReader, value: object, path: str, *, has_parent: bool) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g_index, raw_group in enumerate(reader.items(value, path)):
        g_path = f"{path}[{g_index}]"
        group = reader.fields(raw_group, g_path, frozenset({"coveredResources", "flavors"}))
        if group is None:
            continue
        covered: list[str] = []
        raw_covered = reader.items(group.get("coveredResources"), f"{g_path}.coveredResources", 64)
        if not raw_covered:
            reader.fail(f"{g_path}.coveredResources", "Required value")
        for r_index, raw_name in enumerate(raw_covered):
            name = reader.string(raw_name, f"{g_path}.coveredResources[{r_index}]", required=True)
            if name is None:
                continue
            if name in seen_resources:
                reader.fail(
                    f"{g_path}.coveredResources[{r_index}]",
                    f"Duplicate value: {show_value(name)}: a resource may be covered by one resource group only",
                )
            seen_resources.add(name)
            covered.append(name)
        flavors: list[FlavorQuotas] = []
        raw_flavors = reader.items(group.get("flavors"), f"{g_path}.flavors", 64)
        if not raw_flavors:
            reader.fail(f"{g_path}.flavors", "Required value")
        for f_index, raw_flavor in enumerate(raw_flavors):
            f_path = f"{g_path}.flavors[{f_index}]"
            flavor = reader.fields(raw_flavor, f_path, frozenset({"name", "resources"}))
            if flavor is None:
                continue
            flavor_name = reader.name(flavor.get("name"), f"{f_path}.name")
            if flavor_name is not None:
                if flavor_name in seen_flavors:
                    reader.fail(
                        f"{f_path}.name",
                        f"Duplicate value: {show_value(flavor_name)}: a flavor may appear in one resource group only",
                    )
                seen_flavors.add(flavor_name)
            quotas = _flavor_resources(reader, flavor.get("resources"), f"{f_path}.resources", has_parent=has_parent)
            if [quota.name for quota in quotas] != covered and len(quotas) == len(
                reader.items(flavor.get("resources"), f"{f_path}.resources", 64)
            ):
                reader.invalid(
                    f"{f_path}.resources",
                    [quota.name for quota in quotas],
                    f"must list the covered resources {covered}, in the same order",
                )
            flavors.append(FlavorQuotas(flavor_name or "", tuple(quotas)))
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def _flavor_resources(reader: FieldReader, value: object, path: str, *, has_parent: bool) -> list[ResourceQuota]:
    quotas: list[ResourceQuota] = []
    for index, raw in enumerate(reader.items(value, path, 64)):
        where = f"{path}[{index}]"
        spec = reader.fields(raw, where, frozenset({"name", "nominalQuota", "borrowingLimit", "lendingLimit"}))
        if spec is None:
            continue
        name = reader.string(spec.get("name"), f"{where}.name", required=True)
        nominal = reader.amount(spec.get("nominalQuota"), f"{where}.nominalQuota", required=True)
        borrowing = reader.amount(spec.get("borrowingLimit"), f"{where}.borrowingLimit")
        lending = reader.amount(spec.get("lendingLimit"), f"{where}.lendingLimit")
        for field_name, limit in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
            if limit is not None and not has_parent:
                reader.fail(f"{where}.{field_name}", "must be unset when cohortName is empty")
        if lending is not None and nominal is not None and lending > nominal:
            reader.invalid(
                f"{where}.lendingLimit", spec.get("lendingLimit"), "must be less than or equal to nominalQuota"
            )
        if name is None or nominal is None:
            continue
        quotas.append(
            ResourceQuota(name, to_units(name, nominal), _quota_units(name, borrowing), _quota_units(name, lending))
        )
    return quotas


def _fair_weight(reader: FieldReader, value: object, path: str) -> Fraction:
    spec = reader.fields(value, path, frozenset({"weight"}))
    if spec is None:
        return Fraction(1)
    weight = reader.amount(spec.get("weight"), f"{path}.weight")
    return Fraction(1) if weight is None else weight


def _collect(parse: Callable[[FieldReader, object], object]) -> Callable[[object], list[FieldError]]:
    def validate(obj: object) -> list[FieldError]:
        reader = FieldReader()
        parse(reader, obj)
        return reader.errors

    return validate


def _read_resource_flavor(reader: FieldReader, obj: object) -> ResourceFlavor:
    top = reader.header(obj, KUEUE_API, "ResourceFlavor", frozenset({"spec"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = (
        reader.fields(top.get("spec"), "spec", frozenset({"nodeLabels", "nodeTaints", "tolerations", "topologyName"}))
        or {}
    )
    labels = reader.string_map(spec.get("nodeLabels"), "spec.nodeLabels", 8)
    taints: list[Taint] = []
    for index, raw in enumerate(reader.items(spec.get("nodeTaints"), "spec.nodeTaints", 8)):
        where = f"spec.nodeTaints[{index}]"
        taint = reader.fields(raw, where, frozenset({"key", "value", "effect", "timeAdded"}))
        if taint is None:
            continue
        key = reader.string(taint.get("key"), f"{where}.key", required=True)
        effect = reader.choice(taint.get("effect"), f"{where}.effect", TaintEffect, TaintEffect.NO_SCHEDULE)
        if taint.get("effect") is None:
            reader.fail(f"{where}.effect", "Required value")
        if key is not None:
            taints.append(Taint(key, reader.string(taint.get("value"), f"{where}.value") or "", effect))
    tolerations = read_tolerations(reader, spec.get("tolerations"), "spec.tolerations", 8)
    topology = reader.string(spec.get("topologyName"), "spec.topologyName")
    return ResourceFlavor(name, labels, tuple(taints), tolerations, topology)


def _read_topology(reader: FieldReader, obj: object) -> Topology:
    """A Topology, with Kueue's rules: 1 to 16 levels, unique, ``kubernetes.io/hostname`` only the last."""
    top = reader.header(obj, KUEUE_API, "Topology", frozenset({"spec"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = reader.fields(top.get("spec"), "spec", frozenset({"levels"})) or {}
    levels: list[str] = []
    raw_levels = reader.items(spec.get("levels"), "spec.levels", MAX_TOPOLOGY_LEVELS)
    if not raw_levels:
        reader.fail("spec.levels", "Required value: a Topology names at least one level")
    for index, raw in enumerate(raw_levels):
        level = reader.fields(raw, f"spec.levels[{index}]", frozenset({"nodeLabel"}))
        label = None if level is None else reader.string(level.get("nodeLabel"), f"spec.levels[{index}].nodeLabel")
        if label is None or label == "":
            reader.fail(f"spec.levels[{index}].nodeLabel", "Required value")
            continue
        levels.append(label)
    if len(set(levels)) != len(levels):
        reader.invalid("spec.levels", levels, "must be unique")
    if HOSTNAME_LABEL in levels[:-1]:
        reader.invalid(
            "spec.levels", levels, "the kubernetes.io/hostname label can only be used at the lowest level of topology"
        )
    return Topology(name, tuple(levels))


def _read_topology_request(reader: FieldReader, raw: object, path: str) -> TopologyRequest | None:
    """A pod set's ``topologyRequest``: at most one of required, preferred and unconstrained (the webhook
    derives it from the pod template's annotations, one of them at most)."""
    if raw is None:
        return None
    spec = reader.fields(
        raw,
        path,
        frozenset(
            {
                "required",
                "preferred",
                "unconstrained",
                "podIndexLabel",
                "subGroupIndexLabel",
                "subGroupCount",
                "podSetGroupName",
                "podSetSliceRequiredTopology",
                "podSetSliceSize",
                "podsetSliceRequiredTopologyConstraints",
            }
        ),
    )
    if spec is None:
        return None
    required = reader.string(spec.get("required"), f"{path}.required")
    preferred = reader.string(spec.get("preferred"), f"{path}.preferred")
    unconstrained = reader.boolean(spec.get("unconstrained"), f"{path}.unconstrained", False)
    if sum((required is not None, preferred is not None, unconstrained)) > 1:
        reader.fail(path, "Invalid value: must specify at most one of required, preferred and unconstrained")
    slice_level = reader.string(spec.get("podSetSliceRequiredTopology"), f"{path}.podSetSliceRequiredTopology")
    slice_size = reader.integer(spec.get("podSetSliceSize"), f"{path}.podSetSliceSize", minimum=1)
    group = reader.string(spec.get("podSetGroupName"), f"{path}.podSetGroupName")
    layers_path = f"{path}.podsetSliceRequiredTopologyConstraints"
    layers: list[tuple[str, int]] = []
    for index, raw_layer in enumerate(reader.items(spec.get("podsetSliceRequiredTopologyConstraints"), layers_path, 3)):
        where = f"{layers_path}[{index}]"
        layer = reader.fields(raw_layer, where, frozenset({"topology", "size"}))
        if layer is None:
            continue
        level = reader.string(layer.get("topology"), f"{where}.topology", required=True)
        size = reader.integer(layer.get("size"), f"{where}.size", minimum=1, required=True)
        if level is not None and size is not None:
            layers.append((level, size))
    # Only these ask for a topology (Kueue's IsExplicitlyRequestingTAS): a request naming just its pods' index
    # label, as Kueue writes for every Job, asks nothing, and on a TAS-only queue is implied.
    asked = (required, preferred, spec.get("unconstrained"), slice_level, slice_size)
    if all(value is None for value in asked) and not layers:
        return None
    return TopologyRequest(required, preferred, unconstrained, slice_level, slice_size, group, tuple(layers))


def _read_cluster_queue(reader: FieldReader, obj: object) -> ClusterQueue:
    top = reader.header(obj, KUEUE_API, "ClusterQueue", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = (
        reader.fields(
            top.get("spec"),
            "spec",
            frozenset(
                {
                    "resourceGroups",
                    "cohortName",
                    "namespaceSelector",
                    "queueingStrategy",
                    "stopPolicy",
                    "flavorFungibility",
                    "preemption",
                    "fairSharing",
                    "admissionChecksStrategy",
                    "admissionScope",
                }
            ),
        )
        or {}
    )
    cohort = reader.name(spec.get("cohortName"), "spec.cohortName", required=False)
    groups = _resource_groups(reader, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=cohort is not None)
    selector = (
        None
        if spec.get("namespaceSelector") is None
        else read_label_selector(reader, spec["namespaceSelector"], "spec.namespaceSelector")
    )
    fungibility_spec = (
        reader.fields(
            spec.get("flavorFungibility"), "spec.flavorFungibility", frozenset({"whenCanBorrow", "whenCanPreempt"})
        )
        or {}
    )
    fungibility = FlavorFungibility(
        reader.choice(
            fungibility_spec.get("whenCanBorrow"),
            "spec.flavorFungibility.whenCanBorrow",
            WhenCanBorrow,
            WhenCanBorrow.MAY_STOP_SEARCH,
        ),
        reader.choice(
            fungibility_spec.get("whenCanPreempt"),
            "spec.flavorFungibility.whenCanPreempt",
            WhenCanPreempt,
            WhenCanPreempt.TRY_NEXT_FLAVOR,
        ),
    )
    preemption = _preemption(reader, spec.get("preemption"))
    return ClusterQueue(
        name=name,
        resource_groups=groups,
        cohort=cohort,
        namespace_selector=selector,
        queueing_strategy=reader.choice(
            spec.get("queueingStrategy"), "spec.queueingStrategy", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO
        ),
        stop_policy=reader.choice(spec.get("stopPolicy"), "spec.stopPolicy", StopPolicy, StopPolicy.NONE),
        flavor_fungibility=fungibility,
        preemption=preemption,
        fair_weight=_fair_weight(reader, spec.get("fairSharing"), "spec.fairSharing"),
        admission_checks=_admission_checks_strategy(reader, spec.get("admissionChecksStrategy")),
    )


def _admission_checks_strategy(reader: FieldReader, value: object) -> tuple[AdmissionCheckRule, ...]:
    path = "spec.admissionChecksStrategy"
    strategy = reader.fields(value, path, frozenset({"admissionChecks"})) or {}
    if value is not None and not strategy.get("admissionChecks"):
        reader.fail(f"{path}.admissionChecks", "Required value: name at least one AdmissionCheck")
    rules: list[AdmissionCheckRule] = []
    seen: set[str] = set()
    for index, item in enumerate(reader.items(strategy.get("admissionChecks"), f"{path}.admissionChecks", 64)):
        where = f"{path}.admissionChecks[{index}]"
        rule = reader.fields(item, where, frozenset({"name", "onFlavors"})) or {}
        name = reader.name(rule.get("name"), f"{where}.name")
        flavors = [
            reader.name(flavor, f"{where}.onFlavors[{position}]")
            for position, flavor in enumerate(reader.items(rule.get("onFlavors"), f"{where}.onFlavors", 64))
        ]
        if name is None:
            continue
        if name in seen:
            reader.fail(f"{where}.name", f"Duplicate value: {show_value(name)}")
            continue
        seen.add(name)
        rules.append(AdmissionCheckRule(name, tuple(sorted({flavor for flavor in flavors if flavor is not None}))))
    return tuple(rules)


def _read_admission_check(reader: FieldReader, obj: object) -> AdmissionCheck:
    """An AdmissionCheck's spec, and whether its controller set it ``Active`` (``status`` is read, not validated:
    it is its controller's, and anything but an ``Active`` condition True leaves the check inactive)."""
    top = reader.header(obj, KUEUE_API, "AdmissionCheck", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = reader.fields(top.get("spec"), "spec", frozenset({"controllerName", "parameters"})) or {}
    controller = reader.string(spec.get("controllerName"), "spec.controllerName", required=True) or ""
    parameters = reader.fields(spec.get("parameters"), "spec.parameters", frozenset({"apiGroup", "kind", "name"}))
    for field in ("apiGroup", "kind", "name"):
        if parameters and field not in parameters:
            reader.fail(f"spec.parameters.{field}", "Required value")
    status = top.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    active = isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Active" and c.get("status") == "True" for c in conditions
    )
    return AdmissionCheck(name, controller, active)


def _preemption(reader: FieldReader, value: object) -> Preemption:
    spec = (
        reader.fields(
            value, "spec.preemption", frozenset({"reclaimWithinCohort", "withinClusterQueue", "borrowWithinCohort"})
        )
        or {}
    )
    reclaim = reader.choice(
        spec.get("reclaimWithinCohort"), "spec.preemption.reclaimWithinCohort", ReclaimPolicy, ReclaimPolicy.NEVER
    )
    within = reader.choice(
        spec.get("withinClusterQueue"),
        "spec.preemption.withinClusterQueue",
        WithinClusterQueuePolicy,
        WithinClusterQueuePolicy.NEVER,
    )
    borrow = (
        reader.fields(
            spec.get("borrowWithinCohort"),
            "spec.preemption.borrowWithinCohort",
            frozenset({"policy", "maxPriorityThreshold"}),
        )
        or {}
    )
    policy = reader.choice(
        borrow.get("policy"),
        "spec.preemption.borrowWithinCohort.policy",
        BorrowWithinCohortPolicy,
        BorrowWithinCohortPolicy.NEVER,
    )
    threshold = reader.integer(
        borrow.get("maxPriorityThreshold"), "spec.preemption.borrowWithinCohort.maxPriorityThreshold"
    )
    if policy is not BorrowWithinCohortPolicy.NEVER and reclaim is ReclaimPolicy.NEVER:
        reader.invalid(
            "spec.preemption",
            "object",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: "
            "enable reclaimWithinCohort to preempt while borrowing",
        )
    return Preemption(reclaim, within, policy, threshold)


def _read_local_queue(reader: FieldReader, obj: object) -> LocalQueue:
    top = reader.header(obj, KUEUE_API, "LocalQueue", frozenset({"spec", "status"})) or {}
    name, namespace = reader.metadata(top, namespaced=True)
    spec = reader.fields(top.get("spec"), "spec", frozenset({"clusterQueue", "stopPolicy", "fairSharing"})) or {}
    cluster_queue = reader.name(spec.get("clusterQueue"), "spec.clusterQueue") or ""
    _fair_weight(reader, spec.get("fairSharing"), "spec.fairSharing")
    stop = reader.choice(spec.get("stopPolicy"), "spec.stopPolicy", StopPolicy, StopPolicy.NONE)
    return LocalQueue(namespace, name, cluster_queue, stop)


def _read_cohort(reader: FieldReader, obj: object) -> Cohort:
    top = reader.header(obj, KUEUE_API, "Cohort", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = reader.fields(top.get("spec"), "spec", frozenset({"parentName", "resourceGroups", "fairSharing"})) or {}
    parent = reader.name(spec.get("parentName"), "spec.parentName", required=False)
    if parent is not None and parent == name:
        reader.invalid("spec.parentName", parent, "a Cohort cannot be its own parent")
    groups = _resource_groups(reader, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=parent is not None)
    return Cohort(name, parent, groups, _fair_weight(reader, spec.get("fairSharing"), "spec.fairSharing"))


def _read_priority_class(reader: FieldReader, obj: object) -> WorkloadPriorityClass:
    top = reader.header(obj, KUEUE_API, "WorkloadPriorityClass", frozenset({"value", "description"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    value = reader.integer(top.get("value"), "value", required=True)
    if value is not None and not -(2**31) <= value < 2**31:
        reader.invalid("value", value, "must be a 32-bit integer")
    return WorkloadPriorityClass(name, value or 0, reader.string(top.get("description"), "description") or "")


def _read_namespace(reader: FieldReader, obj: object) -> Namespace:
    top = reader.header(obj, "v1", "Namespace", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    meta = top.get("metadata") if isinstance(top.get("metadata"), Mapping) else {}
    labels = reader.string_map((meta or {}).get("labels"), "metadata.labels")
    labels["kubernetes.io/metadata.name"] = name
    return Namespace(name, labels)


# The Configuration Kueue runs with when given none: waitForPodsReady on, as since v0.19.
KUEUE_DEFAULTS = Configuration(wait_for_pods_ready=WaitForPodsReady())


def _read_configuration(reader: FieldReader, obj: object) -> Configuration:
    known = frozenset(
        {
            "namespace",
            "manageJobsWithoutQueueName",
            "managedJobsNamespaceSelector",
            "waitForPodsReady",
            "fairSharing",
            "health",
            "metrics",
            "webhook",
            "leaderElection",
            "controller",
            "clientConnection",
            "integrations",
            "queueVisibility",
            "internalCertManagement",
            "multiKueue",
            "resources",
            "featureGates",
            "objectRetentionPolicies",
            "admissionFairSharing",
        }
    )
    top = reader.header(obj, CONFIG_API, "Configuration", known) or {}
    manage = reader.boolean(top.get("manageJobsWithoutQueueName"), "manageJobsWithoutQueueName", False)
    selector = None
    if top.get("managedJobsNamespaceSelector") is not None:
        selector = read_label_selector(reader, top["managedJobsNamespaceSelector"], "managedJobsNamespaceSelector")
    wait: WaitForPodsReady | None = WaitForPodsReady()  # on by default, as in Kueue v0.19+
    raw_wait = top.get("waitForPodsReady")
    if raw_wait is not None:
        wait = _wait_for_pods_ready(reader, raw_wait)
    gates = top.get("featureGates")
    if (isinstance(gates, Mapping) and gates.get("DisableWaitForPodsReady") is True) or (
        isinstance(raw_wait, Mapping) and raw_wait.get("enable") is False  # v1beta1's switch, where a file has it
    ):
        wait = None
    fair: FairSharing | None = None
    if top.get("fairSharing") is not None:
        spec = reader.fields(top["fairSharing"], "fairSharing", frozenset({"preemptionStrategies", "enable"})) or {}
        strategies = tuple(
            reader.choice(
                raw,
                f"fairSharing.preemptionStrategies[{index}]",
                FairSharingStrategy,
                FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            )
            for index, raw in enumerate(
                reader.items(spec.get("preemptionStrategies"), "fairSharing.preemptionStrategies", 2)
            )
        )
        fair = FairSharing(strategies) if strategies else FairSharing()
    return Configuration(manage, selector, wait, fair)


def _wait_for_pods_ready(reader: FieldReader, value: object) -> WaitForPodsReady:
    spec = (
        reader.fields(
            value,
            "waitForPodsReady",
            frozenset({"enable", "timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}),
        )
        or {}
    )
    timeout = 1800
    if spec.get("timeout") is not None:
        timeout = reader.duration(spec["timeout"], "waitForPodsReady.timeout") or timeout
    recovery: int | None = timeout  # as Kueue: the timeout's value when absent; "0s" turns it off
    if spec.get("recoveryTimeout") is not None:
        recovery = reader.duration(spec["recoveryTimeout"], "waitForPodsReady.recoveryTimeout") or None
    block = reader.boolean(spec.get("blockAdmission"), "waitForPodsReady.blockAdmission", False)
    requeuing = (
        reader.fields(
            spec.get("requeuingStrategy"),
            "waitForPodsReady.requeuingStrategy",
            frozenset({"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}),
        )
        or {}
    )
    where = "waitForPodsReady.requeuingStrategy"
    base = reader.integer(requeuing.get("backoffBaseSeconds"), f"{where}.backoffBaseSeconds", minimum=1)
    maximum = reader.integer(requeuing.get("backoffMaxSeconds"), f"{where}.backoffMaxSeconds", minimum=1)
    limit = reader.integer(requeuing.get("backoffLimitCount"), f"{where}.backoffLimitCount", minimum=0)
    stamp = requeuing.get("timestamp", "Eviction")
    if stamp not in ("Eviction", "Creation"):
        reader.invalid(f"{where}.timestamp", stamp, 'must be "Eviction" or "Creation"')
        stamp = "Eviction"
    return WaitForPodsReady(timeout, base or 60, maximum or 3600, limit, recovery, block, str(stamp))


def _read_workload(reader: FieldReader, obj: object, priorities: Mapping[str, int]) -> Workload:
    top = reader.header(obj, KUEUE_API, "Workload", frozenset({"spec", "status"})) or {}
    name, namespace = reader.metadata(top, namespaced=True)
    meta = top.get("metadata") if isinstance(top.get("metadata"), Mapping) else {}
    spec = (
        reader.fields(
            top.get("spec"),
            "spec",
            frozenset(
                {
                    "podSets",
                    "queueName",
                    "priorityClassRef",
                    "priority",
                    "active",
                    "maximumExecutionTimeSeconds",
                }
            ),
        )
        or {}
    )
    queue = reader.name(spec.get("queueName"), "spec.queueName", required=False) or ""
    pod_sets = tuple(
        pod_set
        for index, raw in enumerate(reader.items(spec.get("podSets"), "spec.podSets", 8))
        if (pod_set := _pod_set(reader, raw, f"spec.podSets[{index}]")) is not None
    )
    if not pod_sets:
        reader.fail("spec.podSets", "Required value")
    priority_class = None
    if spec.get("priorityClassRef") is not None:
        ref = reader.fields(spec["priorityClassRef"], "spec.priorityClassRef", frozenset({"group", "kind", "name"}))
        priority_class = reader.name((ref or {}).get("name"), "spec.priorityClassRef.name")
    priority = reader.integer(spec.get("priority"), "spec.priority")
    if priority is None:
        priority = priorities.get(priority_class, 0) if priority_class is not None else 0
    max_exec = reader.integer(spec.get("maximumExecutionTimeSeconds"), "spec.maximumExecutionTimeSeconds", minimum=1)
    created = 0.0
    stamp = (meta or {}).get("creationTimestamp")
    if isinstance(stamp, str):
        try:
            created = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            reader.invalid("metadata.creationTimestamp", stamp, "must be an RFC 3339 time")
    return Workload(
        namespace=namespace,
        name=name,
        queue_name=queue,
        pod_sets=pod_sets,
        created=created,
        uid=str((meta or {}).get("uid") or ""),
        priority=priority,
        priority_class=priority_class,
        active=reader.boolean(spec.get("active"), "spec.active", True),
        max_execution_seconds=max_exec,
    )


def _pod_set(reader: FieldReader, raw: object, path: str) -> PodSet | None:
    spec = reader.fields(raw, path, frozenset({"name", "count", "minCount", "template", "topologyRequest"}))
    if spec is None:
        return None
    name = reader.name(spec.get("name"), f"{path}.name", label=True) or "main"
    count = reader.integer(spec.get("count"), f"{path}.count", minimum=0)
    count = 1 if count is None else count
    min_count = reader.integer(spec.get("minCount"), f"{path}.minCount", minimum=1)
    if min_count is not None and min_count > count:
        reader.invalid(f"{path}.minCount", min_count, "must be less than or equal to count")
    template = spec.get("template") if isinstance(spec.get("template"), Mapping) else {}
    pod_spec = (template or {}).get("spec") if isinstance((template or {}).get("spec"), Mapping) else {}
    requests = read_pod_requests(reader, pod_spec or {}, f"{path}.template.spec")
    selector = reader.string_map((pod_spec or {}).get("nodeSelector"), f"{path}.template.spec.nodeSelector")
    tolerations = read_tolerations(
        reader, (pod_spec or {}).get("tolerations"), f"{path}.template.spec.tolerations", None
    )
    affinity = read_node_affinity(reader, (pod_spec or {}).get("affinity"), f"{path}.template.spec.affinity")
    topology = _read_topology_request(reader, spec.get("topologyRequest"), f"{path}.topologyRequest")
    return PodSet(name, count, requests, min_count, selector, tolerations, affinity, topology)


def _parser(kind: str, read: Callable[[FieldReader, object], _T]) -> Callable[[object], _T]:
    def parse(obj: object) -> _T:
        reader = FieldReader()
        result = read(reader, obj)
        return finish(reader, kind, object_name(obj), result)

    parse.__doc__ = f"Parse and default a {kind}; raise InvalidObjectError listing every bad field."
    return parse


parse_resource_flavor = _parser("ResourceFlavor", _read_resource_flavor)
parse_cluster_queue = _parser("ClusterQueue", _read_cluster_queue)
parse_local_queue = _parser("LocalQueue", _read_local_queue)
parse_cohort = _parser("Cohort", _read_cohort)
parse_workload_priority_class = _parser("WorkloadPriorityClass", _read_priority_class)
parse_namespace = _parser("Namespace", _read_namespace)
parse_configuration = _parser("Configuration", _read_configuration)

validate_resource_flavor = _collect(_read_resource_flavor)
validate_cluster_queue = _collect(_read_cluster_queue)
validate_local_queue = _collect(_read_local_queue)
validate_cohort = _collect(_read_cohort)
validate_workload_priority_class = _collect(_read_priority_class)
validate_namespace = _collect(_read_namespace)
validate_configuration = _collect(_read_configuration)
validate_topology = _collect(_read_topology)


def parse_required_node_affinity(raw: object, path: str) -> tuple[tuple[Requirement, ...], ...]:
    """A ``requiredDuringSchedulingIgnoredDuringExecution`` node selector given outside a pod spec (the
    simulator's workloads); raise InvalidObjectError listing every bad field under ``path``."""
    reader = FieldReader()
    terms = read_node_selector(reader, raw, path)
    return finish(reader, "node affinity", path, terms)


def parse_topology_request(raw: object, path: str) -> TopologyRequest | None:
    """A pod set's ``topologyRequest`` given outside a Workload (the simulator's workloads); raise
    InvalidObjectError listing every bad field under ``path``."""
    reader = FieldReader()
    request = _read_topology_request(reader, raw, path)
    return finish(reader, "topologyRequest", path, request)


def parse_workload(obj: object, priorities: Mapping[str, int] | None = None) -> Workload:
    """Parse a Workload; ``priorities`` maps WorkloadPriorityClass names to values for ``priorityClassRef``."""
    reader = FieldReader()
    workload = _read_workload(reader, obj, priorities or {})
    return finish(reader, "Workload", object_name(obj), workload)


def validate_workload(obj: object) -> list[FieldError]:
    reader = FieldReader()
    _read_workload(reader, obj, {})
    return reader.errors


_READERS: dict[tuple[str, str], Callable[[FieldReader, object], ApiObject]] = {
    (KUEUE_API, "ResourceFlavor"): _read_resource_flavor,
    (KUEUE_API, "ClusterQueue"): _read_cluster_queue,
    (KUEUE_API, "LocalQueue"): _read_local_queue,
    (KUEUE_API, "Cohort"): _read_cohort,
    (KUEUE_API, "WorkloadPriorityClass"): _read_priority_class,
    (KUEUE_API, "AdmissionCheck"): _read_admission_check,
    (KUEUE_API, "Topology"): _read_topology,
    ("v1", "Namespace"): _read_namespace,
    (CONFIG_API, "Configuration"): _read_configuration,
}


def parse_object(obj: object) -> ApiObject:
    """Parse any configuration object the engine understands, dispatching on apiVersion and kind."""
    api_version = obj.get("apiVersion") if isinstance(obj, Mapping) else None
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    # Only strings name a kind: anything else (a list nested 5,000 deep, an aliased YAML bomb) is shown, not str()-ed.
    if isinstance(api_version, str) and isinstance(kind, str) and (read := _READERS.get((api_version, kind))):
        reader = FieldReader()
        result = read(reader, obj)
        return finish(reader, kind, object_name(obj), result)
    known = ", ".join(f"{api} {k}" for api, k in _READERS)
    raise InvalidObjectError(
        kind if isinstance(kind, str) and kind.isprintable() else show_value(kind),
        object_name(obj),
        [
            FieldError(
                "kind", f"Unsupported value: {show_value(kind)} ({show_value(api_version)}): the engine reads {known}"
            )
        ],
    )
