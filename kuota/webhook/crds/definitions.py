"""The ``kueue.x-k8s.io/v1beta2`` CustomResourceDefinitions kuota serves, defined once, here.

What the schema can say is said here (types, enums, bounds, defaults, CEL rules, immutability); what it
cannot (sums across flavors, references between objects) is the engine's validator, behind the webhook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kuota.webhook.crds.schemas import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    INT32_MAX,
    Schema,
    array,
    boolean,
    conditions,
    date_time,
    integer,
    label_selector,
    name_reference,
    non_negative_quantity,
    obj,
    preserved_object,
    quantity,
    string,
    string_map,
    taint,
    toleration,
)

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
STOP_POLICIES = ["None", "Hold", "HoldAndDrain"]
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str
    description: str
    priority: int = 0

    def manifest(self) -> dict[str, Any]:
        column: dict[str, Any] = {
            "name": self.name,
            "jsonPath": self.json_path,
            "type": self.type,
            "description": self.description,
        }
        if self.priority:
            column["priority"] = self.priority
        return column


@dataclass(frozen=True)
class Definition:
    kind: str
    plural: str
    namespaced: bool
    schema: Schema
    columns: tuple[PrinterColumn, ...] = ()
    short_names: tuple[str, ...] = ()
    status: bool = True
    categories: tuple[str, ...] = field(default=("kueue",))

    @property
    def name(self) -> str:
        return f"{self.plural}.{GROUP}"

    def manifest(self) -> dict[str, Any]:
        version: dict[str, Any] = {
            "name": VERSION,
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": self.schema},
        }
        if self.status:
            version["subresources"] = {"status": {}}
        if self.columns:
            version["additionalPrinterColumns"] = [column.manifest() for column in self.columns]
        names: dict[str, Any] = {
            "kind": self.kind,
            "listKind": f"{self.kind}List",
            "plural": self.plural,
            "singular": self.kind.lower(),
            "categories": list(self.categories),
        }
        if self.short_names:
            names["shortNames"] = list(self.short_names)
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {
                "name": self.name,
                "labels": {"app.kubernetes.io/name": "kuota", "app.kubernetes.io/component": "crds"},
            },
            "spec": {
                "group": GROUP,
                "names": names,
                "scope": "Namespaced" if self.namespaced else "Cluster",
                "versions": [version],
            },
        }


def _root(
    kind: str, summary: str, spec: Schema | None, status: Schema | None, extra: dict[str, Schema] | None = None
) -> Schema:
    properties: dict[str, Schema] = {
        "apiVersion": string("the versioned schema of this object"),
        "kind": string("the REST resource this object represents"),
        "metadata": {"type": "object"},
    }
    if spec is not None:
        properties["spec"] = spec
    if status is not None:
        properties["status"] = status
    properties.update(extra or {})
    return obj(properties, f"{kind}: {summary}")


def _fair_sharing() -> Schema:
    return obj(
        {
            "weight": quantity(
                "comparative advantage when competing for unused quota; 0 means an infinite share", default=1
            )
        },
        "properties when fair sharing is enabled in the manager configuration",
    )


def _fair_sharing_status() -> Schema:
    return obj(
        {"weightedShare": integer("the dominant resource share, divided by weight", minimum=0, int64=True)},
        "fair sharing state, when fair sharing is enabled",
        required=["weightedShare"],
    )


def _resource_groups(description: str) -> Schema:
    resource = obj(
        {
            "name": string("the resource name, e.g. cpu, memory, nvidia.com/gpu", min_length=1, max_length=253),
            "nominalQuota": non_negative_quantity("how much of the resource is available at a time"),
            "borrowingLimit": non_negative_quantity("most that may be borrowed from the cohort; unset = unlimited"),
            "lendingLimit": non_negative_quantity("most of the unused quota lent to the cohort; unset = all of it"),
        },
        required=["name", "nominalQuota"],
    )
    flavor = obj(
        {
            "name": name_reference("a ResourceFlavor's name"),
            "resources": array(
                resource,
                "quota per covered resource, in the order of coveredResources",
                min_items=1,
                max_items=64,
                list_type="map",
                map_keys=["name"],
            ),
        },
        required=["name", "resources"],
    )
    group = obj(
        {
            "coveredResources": array(
                string(min_length=1, max_length=253), "resources covered by this group", min_items=1, max_items=64
            ),
            "flavors": array(
                flavor,
                "flavors providing the covered resources, in order of preference",
                min_items=1,
                max_items=64,
                list_type="map",
                map_keys=["name"],
            ),
        },
        required=["coveredResources", "flavors"],
        rules=[
            (
                "self.flavors.all(f, size(f.resources) == size(self.coveredResources))",
                "flavors must have the same number of resources as the coveredResources",
            ),
        ],
    )
    return array(group, description, max_items=16)


def _flavor_usage(with_borrowed: bool) -> Schema:
    usage: dict[str, Schema] = {
        "name": string("the resource name"),
        "total": quantity("quota in use, including what is borrowed"),
    }
    if with_borrowed:
        usage["borrowed"] = quantity("quota in use above nominalQuota")
    return array(
        obj(
            {
                "name": name_reference("the flavor's name"),
                "resources": array(obj(usage, required=["name"]), list_type="map", map_keys=["name"], max_items=64),
            },
            required=["name", "resources"],
        ),
        list_type="map",
        map_keys=["name"],
        max_items=64,
    )


def _no_limits_without(owner_field: str, limit: str, message: str) -> tuple[str, str]:
    return (
        f"!has(self.{owner_field}) && has(self.resourceGroups) ? "
        f"self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.{limit})))) : true",
        message,
    )


def _tolerations(description: str) -> Schema:
    return array(
        toleration(),
        description,
        max_items=8,
        rules=[
            (
                "self.all(x, !has(x.key) || x.key == '' ? x.operator == 'Exists' : true)",
                "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
            ),
            (
                "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
                "effect must be 'NoExecute' when 'tolerationSeconds' is set",
            ),
            (
                "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) || x.value == '' : true)",
                "a value must be empty when 'operator' is 'Exists'",
            ),
        ],
    )


RESOURCE_FLAVOR = Definition(
    kind="ResourceFlavor",
    plural="resourceflavors",
    namespaced=False,
    short_names=("flavor", "flavors", "rf"),
    status=False,
    schema=_root(
        "ResourceFlavor",
        "a kind of node (GPU model, pricing) that quota is given in",
        obj(
            {
                "nodeLabels": string_map(
                    "labels of the nodes of this flavor; injected into admitted pods' nodeSelector", max_properties=8
                ),
                "nodeTaints": array(
                    taint(),
                    "taints of the nodes of this flavor; pod sets must tolerate NoSchedule and NoExecute ones",
                    max_items=8,
                ),
                "tolerations": _tolerations("tolerations added to the pods admitted on this flavor"),
                "topologyName": name_reference("the Topology of this flavor (topology-aware scheduling)"),
            },
            "the flavor's nodes",
            rules=[
                (
                    "!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) >= 1)",
                    "at least one nodeLabel is required when topology is set",
                ),
                (
                    "!has(oldSelf.topologyName) || "
                    "(has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
                    "topologyName is immutable when topologyName is set",
                ),
            ],
        ),
        None,
    ),
)

CLUSTER_QUEUE = Definition(
    kind="ClusterQueue",
    plural="clusterqueues",
    namespaced=False,
    short_names=("cq",),
    columns=(
        PrinterColumn("Cohort", ".spec.cohortName", "string", "Cohort that this ClusterQueue belongs to"),
        PrinterColumn("Strategy", ".spec.queueingStrategy", "string", "The queueing strategy", priority=1),
        PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer", "Number of pending workloads"),
        PrinterColumn(
            "Admitted Workloads",
            ".status.admittedWorkloads",
            "integer",
            "Number of admitted workloads that haven't finished yet",
            priority=1,
        ),
    ),
    schema=_root(
        "ClusterQueue",
        "a team's quota and the policies that share it",
        obj(
            {
                "resourceGroups": _resource_groups("groups of resources and the flavors that give quota for them"),
                "cohortName": name_reference("the cohort this queue borrows from and lends to; empty = none"),
                "queueingStrategy": string(
                    "StrictFIFO blocks behind a head that does not fit; BestEffortFIFO lets the next one try",
                    enum=["StrictFIFO", "BestEffortFIFO"],
                    default="BestEffortFIFO",
                ),
                "namespaceSelector": label_selector(
                    "namespaces allowed to submit to this queue; unset selects none, {} selects all"
                ),
                "flavorFungibility": obj(
                    {
                        "whenCanBorrow": string(
                            "whether to try the next flavor before borrowing in this one",
                            enum=["MayStopSearch", "TryNextFlavor"],
                            default="MayStopSearch",
                        ),
                        "whenCanPreempt": string(
                            "whether to try the next flavor before preempting in this one",
                            enum=["MayStopSearch", "TryNextFlavor"],
                            default="TryNextFlavor",
                        ),
                    },
                    "whether a workload tries the next flavor before borrowing or preempting",
                    default={},
                ),
                "preemption": obj(
                    {
                        "reclaimWithinCohort": string(
                            "preempt borrowers in the cohort to reclaim nominal quota",
                            enum=["Never", "LowerPriority", "Any"],
                            default="Never",
                        ),
                        "withinClusterQueue": string(
                            "preempt workloads of this queue when over nominal quota",
                            enum=["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
                            default="Never",
                        ),
                        "borrowWithinCohort": obj(
                            {
                                "policy": string(
                                    "preempt in the cohort while borrowing",
                                    enum=["Never", "LowerPriority"],
                                    default="Never",
                                ),
                                "maxPriorityThreshold": integer("only preempt workloads at or below this priority"),
                            },
                            default={},
                        ),
                    },
                    "preemption policies",
                    default={},
                    rules=[
                        (
                            "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
                            "self.borrowWithinCohort.policy != 'Never')",
                            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                        )
                    ],
                ),
                "stopPolicy": string(
                    "Hold stops new admissions; HoldAndDrain also evicts what is admitted",
                    enum=STOP_POLICIES,
                    default="None",
                ),
                "fairSharing": _fair_sharing(),
                "admissionChecksStrategy": obj(
                    {
                        "admissionChecks": array(
                            obj(
                                {
                                    "name": string("an AdmissionCheck's name", max_length=316, min_length=1),
                                    "onFlavors": array(
                                        name_reference("a ResourceFlavor's name"),
                                        "the flavors the check runs for; empty: every flavor of the queue",
                                        max_items=64,
                                        list_type="set",
                                    ),
                                },
                                required=["name"],
                            ),
                            "the AdmissionChecks a workload admitted here must pass",
                            min_items=1,
                            max_items=64,
                            list_type="map",
                            map_keys=["name"],
                        ),
                    },
                    "which AdmissionChecks a workload must pass, per flavor",
                    required=["admissionChecks"],
                ),
            },
            "the queue's quota and policies",
            rules=[
                _no_limits_without("cohortName", "borrowingLimit", "borrowingLimit must be nil when cohort is empty"),
                _no_limits_without("cohortName", "lendingLimit", "lendingLimit must be nil when cohort is empty"),
            ],
        ),
        obj(
            {
                "conditions": conditions("Active, with a reason such as FlavorNotFound or Stopped"),
                "flavorsReservation": _flavor_usage(with_borrowed=True),
                "flavorsUsage": _flavor_usage(with_borrowed=True),
                "pendingWorkloads": integer("workloads waiting for admission", minimum=0),
                "reservingWorkloads": integer("workloads holding a quota reservation", minimum=0),
                "admittedWorkloads": integer("admitted workloads not finished yet", minimum=0),
                "fairSharing": _fair_sharing_status(),
            },
            "observed state, written by kuota",
        ),
    ),
)

LOCAL_QUEUE = Definition(
    kind="LocalQueue",
    plural="localqueues",
    namespaced=True,
    short_names=("queue", "queues", "lq"),
    columns=(
        PrinterColumn("ClusterQueue", ".spec.clusterQueue", "string", "Backing ClusterQueue"),
        PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer", "Number of pending workloads"),
        PrinterColumn(
            "Admitted Workloads", ".status.admittedWorkloads", "integer", "Number of admitted workloads not finished"
        ),
    ),
    schema=_root(
        "LocalQueue",
        "a namespace's entry point into a ClusterQueue",
        obj(
            {
                "clusterQueue": {
                    **name_reference("the ClusterQueue this queue submits to; immutable"),
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "field is immutable"}],
                },
                "stopPolicy": string(
                    "Hold stops new admissions; HoldAndDrain also evicts what is admitted",
                    enum=STOP_POLICIES,
                    default="None",
                ),
                "fairSharing": _fair_sharing(),
            },
            "the queue's ClusterQueue",
            required=["clusterQueue"],
        ),
        obj(
            {
                "conditions": conditions("Active"),
                "pendingWorkloads": integer("workloads waiting for admission", minimum=0),
                "reservingWorkloads": integer("workloads holding a quota reservation", minimum=0),
                "admittedWorkloads": integer("admitted workloads not finished yet", minimum=0),
                "flavorsReservation": _flavor_usage(with_borrowed=False),
                "flavorsUsage": _flavor_usage(with_borrowed=False),
                "fairSharing": _fair_sharing_status(),
            },
            "observed state, written by kuota",
        ),
    ),
)

COHORT = Definition(
    kind="Cohort",
    plural="cohorts",
    namespaced=False,
    columns=(PrinterColumn("Parent", ".spec.parentName", "string", "Parent cohort"),),
    schema=_root(
        "Cohort",
        "a node of the borrowing tree, optionally holding quota of its own",
        obj(
            {
                "parentName": name_reference("the parent cohort; unset makes this the root of its tree"),
                "resourceGroups": _resource_groups("quota owned by the cohort, shared by its subtree"),
                "fairSharing": _fair_sharing(),
            },
            "the cohort's place in the tree and its quota",
            rules=[
                _no_limits_without("parentName", "borrowingLimit", "borrowingLimit must be nil when parent is empty"),
                _no_limits_without("parentName", "lendingLimit", "lendingLimit must be nil when parent is empty"),
            ],
        ),
        obj({"fairSharing": _fair_sharing_status()}, "observed state, written by kuota"),
    ),
)

WORKLOAD_PRIORITY_CLASS = Definition(
    kind="WorkloadPriorityClass",
    plural="workloadpriorityclasses",
    namespaced=False,
    status=False,
    columns=(PrinterColumn("Value", ".value", "integer", "Priority value"),),
    schema={
        **_root(
            "WorkloadPriorityClass",
            "a named priority for workloads (label kueue.x-k8s.io/priority-class)",
            None,
            None,
            {
                "value": integer("the priority; higher is admitted first and preempts lower"),
                "description": string("when to use this priority class"),
            },
        ),
        "required": ["value"],
    },
)


LEVEL_LABEL_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
HOSTNAME = "kubernetes.io/hostname"

TOPOLOGY = Definition(
    kind="Topology",
    plural="topologies",
    namespaced=False,
    short_names=("topo",),
    status=False,
    schema={
        **_root(
            "Topology",
            "the levels of node labels (block, rack, host) that topology-aware scheduling places pods in",
            obj(
                {
                    "levels": array(
                        obj(
                            {
                                "nodeLabel": string(
                                    "the node label of this level",
                                    pattern=LEVEL_LABEL_PATTERN,
                                    max_length=316,
                                    min_length=1,
                                )
                            },
                            required=["nodeLabel"],
                        ),
                        "from the widest domain to the narrowest",
                        min_items=1,
                        max_items=16,
                        rules=[
                            (
                                "self == oldSelf || (self[size(self) - 1].nodeLabel == '" + HOSTNAME + "' && "
                                "oldSelf[size(oldSelf) - 1].nodeLabel == '" + HOSTNAME + "')",
                                "levels are mutable only when kubernetes.io/hostname is the lowest level both before "
                                "and after the change",
                            ),
                            ("size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0", "must be unique"),
                            (
                                "size(self.filter(i, i.nodeLabel == '" + HOSTNAME + "')) == 0 || "
                                "self[size(self) - 1].nodeLabel == '" + HOSTNAME + "'",
                                "the kubernetes.io/hostname label can only be used at the lowest level of topology",
                            ),
                        ],
                    )
                },
                "the topology's levels",
                required=["levels"],
            ),
            None,
        ),
        "required": ["spec"],
    },
)


def _topology_request() -> Schema:
    level = string("a level of the flavor's Topology (its node label)", max_length=63)
    return obj(
        {
            "required": {**level, "description": "every pod in one domain of this level"},
            "preferred": {**level, "description": "one domain of this level if it can, else the fewest"},
            "unconstrained": boolean("anywhere in the topology, fewest free nodes first"),
            "podIndexLabel": string("the label holding each pod's index", max_length=317),
            "subGroupIndexLabel": string("the label holding each pod's sub-group index", max_length=317),
            "subGroupCount": integer("number of sub-groups", minimum=0),
            "podSetGroupName": string("pod sets of one group are placed together", max_length=256),
            "podSetSliceRequiredTopology": {**level, "description": "each slice of pods in one domain of this level"},
            "podSetSliceSize": integer("pods per slice", minimum=1),
            "podsetSliceRequiredTopologyConstraints": array(
                obj(
                    {
                        "topology": {**level, "minLength": 1, "description": "the level of this layer's slices"},
                        "size": integer("pods per slice of this layer", minimum=1),
                    },
                    "one layer of slices",
                    required=["topology", "size"],
                ),
                "layers of slices, the widest first (TASMultiLayerTopology)",
                max_items=3,
            ),
        },
        "where the pod set's pods go in its flavor's Topology (topology-aware scheduling)",
        rules=[
            (
                "(has(self.required) ? 1 : 0) + (has(self.preferred) ? 1 : 0) + "
                "(has(self.unconstrained) && self.unconstrained ? 1 : 0) <= 1",
                "must specify at most one of required, preferred and unconstrained",
            ),
        ],
    )


def _topology_assignment() -> Schema:
    values = obj(
        {
            "universal": string("the value of every domain of the slice", max_length=63),
            "individual": obj(
                {
                    "prefix": string("common to every value", max_length=63),
                    "suffix": string("common to every value", max_length=63),
                    "roots": array(string(max_length=63), "per domain, its value between prefix and suffix"),
                },
                required=["roots"],
            ),
        },
        rules=[
            (
                "has(self.universal) != has(self.individual)",
                "exactly one of the fields in [universal individual] must be set",
            )
        ],
    )
    counts = obj(
        {
            "universal": integer("pods in every domain of the slice", minimum=1),
            "individual": array(integer(minimum=1), "per domain, its pods"),
        },
    )
    piece = obj(
        {
            "domainCount": integer("number of domains in this slice", minimum=1),
            "valuesPerLevel": array(values, "per level, the domains' values", min_items=1, max_items=16),
            "podCounts": counts,
        },
        required=["domainCount", "valuesPerLevel", "podCounts"],
    )
    return obj(
        {
            "levels": array(string(max_length=317), "the levels the values name", min_items=1, max_items=16),
            "slices": array(piece, "the domains, in slices", max_items=1000),
        },
        "where the pods go: per domain its level values and pod count (v1beta2's compact form)",
        required=["levels"],
    )


def _pod_set() -> Schema:
    return obj(
        {
            "name": string("the pod set's name", pattern=DNS_LABEL, max_length=63, default="main"),
            "count": integer("number of pods", minimum=0, maximum=INT32_MAX, default=1),
            "minCount": integer("fewest pods the workload can run with (partial admission)", minimum=1),
            "template": preserved_object("the pods' template (a PodTemplateSpec)"),
            "topologyRequest": _topology_request(),
        },
        required=["count", "template"],
        rules=[("!has(self.minCount) || self.minCount <= self.count", "minCount must be less than or equal to count")],
    )


def _admission() -> Schema:
    assignment = obj(
        {
            "name": string("the pod set's name", pattern=DNS_LABEL, max_length=63),
            "flavors": string_map("resource -> the flavor assigned for it"),
            "resourceUsage": {
                "type": "object",
                "description": "total quota used per resource",
                "additionalProperties": quantity(),
            },
            "count": integer("number of pods admitted", minimum=0),
            "topologyAssignment": _topology_assignment(),
        },
        required=["name"],
    )
    return obj(
        {
            "clusterQueue": name_reference("the ClusterQueue that admitted the workload"),
            "podSetAssignments": array(assignment, list_type="map", map_keys=["name"], max_items=8),
        },
        "the quota reservation",
        required=["clusterQueue", "podSetAssignments"],
    )


def _admission_check_state() -> Schema:
    pod_set_update = obj(
        {
            "name": string("the pod set to modify", pattern=DNS_LABEL, max_length=63),
            "labels": string_map("labels added to the pod set's pods"),
            "annotations": string_map("annotations added to the pod set's pods"),
            "nodeSelector": string_map("nodeSelector entries added to the pod set's pods"),
            "tolerations": _tolerations("tolerations added to the pod set's pods"),
        },
        required=["name"],
    )
    return obj(
        {
            "name": string("the AdmissionCheck's name", max_length=316, min_length=1),
            "state": string("the check's state", enum=list(CHECK_STATES)),
            "lastTransitionTime": date_time("when the state last changed"),
            "message": string("what the check's controller says", max_length=32768),
            "requeueAfterSeconds": integer("Retry: wait at least this long before queueing again", minimum=0),
            "retryCount": integer("times this check asked to retry", minimum=0),
            "podSetUpdates": array(
                pod_set_update, "what the check adds to each pod set's pods once admitted", max_items=18
            ),
        },
        required=["name", "state", "lastTransitionTime", "message"],
    )


WORKLOAD = Definition(
    kind="Workload",
    plural="workloads",
    namespaced=True,
    short_names=("kwl", "kueueworkload", "kueueworkloads"),  # Kueue's: "wl" is left to other Workload kinds
    columns=(
        PrinterColumn("Queue", ".spec.queueName", "string", "Name of the queue this workload was submitted to"),
        PrinterColumn(
            "Reserved in",
            ".status.admission.clusterQueue",
            "string",
            "Name of the ClusterQueue where the workload is reserving quota",
        ),
        PrinterColumn("Admitted", ".status.conditions[?(@.type=='Admitted')].status", "string", "Admission status"),
        PrinterColumn("Finished", ".status.conditions[?(@.type=='Finished')].status", "string", "Workload finished"),
        # kuota's own: written by the manager on Workloads pending for more than a minute (controller/etas.py).
        PrinterColumn(
            "ETA",
            ".metadata.annotations.kuota\\.dev/eta",
            "string",
            "Predicted admission time of a pending workload (forward replay of the quota engine)",
        ),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time this workload was created"),
    ),
    schema=_root(
        "Workload",
        "a unit of admission: the pods of one Job, admitted all together or not at all",
        obj(
            {
                "podSets": array(
                    _pod_set(),
                    "the groups of identical pods",
                    min_items=1,
                    max_items=8,
                    list_type="map",
                    map_keys=["name"],
                ),
                "queueName": name_reference("the LocalQueue the workload is submitted to"),
                "priorityClassRef": obj(
                    {
                        "group": string("API group of the class", enum=["kueue.x-k8s.io", "scheduling.k8s.io"]),
                        "kind": string("kind of the class", enum=["WorkloadPriorityClass", "PriorityClass"]),
                        "name": name_reference("the class's name"),
                    },
                    "the priority class the priority comes from",
                    required=["name"],
                ),
                "priority": integer("the priority; higher is admitted first"),
                "active": boolean("false deactivates the workload (evicted, not requeued)", default=True),
                "maximumExecutionTimeSeconds": integer("evict and deactivate after this long admitted", minimum=1),
            },
            "what the workload needs",
            required=["podSets"],
        ),
        obj(
            {
                "admission": _admission(),
                "conditions": conditions("QuotaReserved, Admitted, PodsReady, Evicted, Preempted, Requeued, Finished"),
                "requeueState": obj(
                    {
                        "count": integer("times requeued after a PodsReady timeout", minimum=0),
                        "requeueAt": date_time("when the workload may be queued again"),
                    },
                    "backoff state after evictions",
                ),
                "accumulatedPastExecutionTimeSeconds": integer("time admitted before the last eviction", minimum=0),
                "schedulingStats": obj(
                    {
                        "evictions": array(
                            obj(
                                {
                                    "reason": string("the eviction's reason", max_length=316),
                                    "underlyingCause": string(
                                        "what caused it, where the reason has causes", max_length=316
                                    ),
                                    "count": integer("evictions for this reason and cause", minimum=0),
                                },
                                "",
                                required=["reason", "underlyingCause", "count"],
                            ),
                            "evictions counted by reason and underlying cause",
                            max_items=256,
                            list_type="map",
                            map_keys=["reason", "underlyingCause"],
                        )
                    },
                    "how often the workload was evicted, and why",
                ),
                "admissionChecks": array(
                    _admission_check_state(),
                    "the state of each AdmissionCheck the workload must pass",
                    max_items=8,
                    list_type="map",
                    map_keys=["name"],
                ),
            },
            "observed state, written by kuota",
        ),
    ),
)

ADMISSION_CHECK = Definition(
    kind="AdmissionCheck",
    plural="admissionchecks",
    namespaced=False,
    short_names=("ac",),
    schema=_root(
        "AdmissionCheck",
        "a check a workload must pass, beside its quota, before it starts; decided by its controller",
        obj(
            {
                "controllerName": {
                    **string("the controller that decides this check; immutable", max_length=253, min_length=1),
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "field is immutable"}],
                },
                "parameters": obj(
                    {
                        "apiGroup": string(
                            "the referenced object's API group", pattern=DNS_SUBDOMAIN, max_length=253, min_length=1
                        ),
                        "kind": string(
                            "the referenced object's kind",
                            pattern="^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$",
                            max_length=63,
                            min_length=1,
                        ),
                        "name": string("the referenced object's name", pattern=DNS_LABEL, max_length=63, min_length=1),
                    },
                    "an object holding the check's parameters, for its controller",
                    required=["apiGroup", "kind", "name"],
                ),
            },
            "the check's controller and parameters",
            required=["controllerName"],
        ),
        obj(
            {"conditions": conditions("Active: its controller is ready to decide checks")}, "written by its controller"
        ),
    ),
)

LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)

PROVISIONING_REQUEST_CONFIG = Definition(
    kind="ProvisioningRequestConfig",
    plural="provisioningrequestconfigs",
    namespaced=False,
    short_names=("prc",),
    status=False,
    schema=_root(
        "ProvisioningRequestConfig",
        "how the kueue.x-k8s.io/provisioning-request AdmissionCheck asks the cluster autoscaler for nodes",
        obj(
            {
                "provisioningClassName": string(
                    "the autoscaler's provisioning class (check-capacity.autoscaling.x-k8s.io, ...)",
                    pattern=DNS_SUBDOMAIN,
                    max_length=253,
                    min_length=1,
                ),
                "parameters": {
                    "type": "object",
                    "description": "further parameters of the class, copied to each ProvisioningRequest",
                    "additionalProperties": string("a parameter's value", max_length=255),
                    "maxProperties": 100,
                },
                "managedResources": array(
                    string("a resource name"),
                    "the resources the autoscaler manages (empty: all); pod sets using none are left out, and a "
                    "workload none of whose pod sets use one is Ready at once",
                    max_items=100,
                    list_type="set",
                ),
                "retryStrategy": obj(
                    {
                        "backoffLimitCount": integer(
                            "retries of a failed request before the workload is deactivated (0: none)", default=3
                        ),
                        "backoffBaseSeconds": integer("the first retry's wait; each next one doubles it", default=60),
                        "backoffMaxSeconds": integer("the longest wait between retries", default=1800),
                    },
                    "how a failed (or expired) request is retried",
                    default={"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800},
                ),
                "podSetUpdates": obj(
                    {
                        "nodeSelector": array(
                            obj(
                                {
                                    "key": string(
                                        "the nodeSelector key", pattern=LABEL_KEY, max_length=317, min_length=1
                                    ),
                                    "valueFromProvisioningClassDetail": string(
                                        "the ProvisioningRequest's status.provisioningClassDetails key whose value "
                                        "the key gets",
                                        max_length=32768,
                                        min_length=1,
                                    ),
                                },
                                required=["key", "valueFromProvisioningClassDetail"],
                            ),
                            "nodeSelector entries added to a provisioned workload's pods",
                            max_items=8,
                            list_type="map",
                            map_keys=["key"],
                        )
                    },
                    "what a provisioned workload's pods get, to land on the provisioned nodes",
                ),
                "podSetMergePolicy": string(
                    "which pod sets are asked for as one: IdenticalPodTemplates, or "
                    "IdenticalWorkloadSchedulingRequirements (same requests, nodeSelector, tolerations, affinity)",
                    enum=["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"],
                ),
            },
            "the provisioning class and its parameters",
            required=["provisioningClassName"],
        ),
        None,
    ),
)

DEFINITIONS = (
    RESOURCE_FLAVOR,
    CLUSTER_QUEUE,
    LOCAL_QUEUE,
    COHORT,
    WORKLOAD_PRIORITY_CLASS,
    WORKLOAD,
    ADMISSION_CHECK,
    PROVISIONING_REQUEST_CONFIG,
    TOPOLOGY,
)
