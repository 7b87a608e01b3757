"""Failed-node replacement for admitted TAS workloads: Kueue's node controller (pkg/controller/tas/
node_controller.go, with v0.20's default gates TASFailedNodeReplacement, TASFailedNodeReplacementFailFast,
TASReplaceNodeOnPodTermination and TASReplaceNodeOnNodeTaints) and the second pass of its scheduler.

A node named in an admitted Workload's ``topologyAssignment`` has failed for that Workload when it is gone or has
no Ready condition; or when it is not Ready, or has a ``NoExecute`` or ``NoSchedule`` taint that a pod set placed
there does not tolerate for ever (with its ResourceFlavor's tolerations; one with ``tolerationSeconds`` only for
a while), and none of the Workload's pods there still runs
(each finished or being deleted). The node is written into ``status.unhealthyNodes``; then the engine moves that
node's pods (``engine.replace_node``) and the new ``topologyAssignment`` is written, ``unhealthyNodes`` cleared:
the job's controller makes the missing pods again, gated, and the ungater sends them where the new assignment
says. With no replacement the Workload is evicted, reason ``NodeFailures`` (FailFast); so it is when a node fails
while another is still unreplaced (``multiple_failures``), as Kueue's node controller evicts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kuota.engine import EngineError, EvictionReason, PodSetAssignment, Toleration, Workload, topology_node
from kuota.kube.reflector import Event, EventType, Reflector
from kuota.webhook import topology_assignment
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter
from kuota.webhook.controller.decision_writer import DecisionWriter
from kuota.webhook.controller.errors import ApiWriteError
from kuota.webhook.controller.state import ControllerState
from kuota.webhook.controller.topology_ungater import pods_by_workload

log = logging.getLogger(__name__)

_SCHEDULING_EFFECTS = ("NoExecute", "NoSchedule")


def _ready(node: Mapping[str, Any]) -> str | None:
    """The status of the node's Ready condition, None without one."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


def has_failed(
    node: Mapping[str, Any] | None, tolerations: Iterable[tuple[Toleration, ...]], pods: Iterable[Mapping[str, Any]]
) -> bool:
    """Whether ``node`` (its essence; None: gone) has failed for a Workload whose pod sets placed there tolerate
    ``tolerations`` (one tuple per pod set) and whose pods bound to it are ``pods`` (Kueue's ``getWorkloadStatus``
    under its default gates)."""
    if node is None:
        return True
    ready = _ready(node)
    if ready is None:
        return True
    taints = [t for t in topology_node(node).taints if t.effect.value in _SCHEDULING_EFFECTS]
    # A taint tolerated only for tolerationSeconds counts as untolerated: the pods leave once they pass, and the
    # node fails when none still runs (Kueue's "temporarily tolerated" taint).
    untolerated = any(
        not any(toleration.tolerates(taint) for toleration in tolerated if toleration.seconds is None)
        for tolerated in tolerations
        for taint in taints
    )
    if ready == "True" and not untolerated:
        return False
    return not any(_progressing(pod) for pod in pods)


def _may_have_failed(node: Mapping[str, Any] | None) -> bool:
    if node is None:
        return True
    taints = (node.get("spec") or {}).get("taints") or []
    return _ready(node) != "True" or any(t.get("effect") in _SCHEDULING_EFFECTS for t in taints)


def _progressing(pod: Mapping[str, Any]) -> bool:
    """Not being deleted and not finished: Kueue's ``hasProgressingPods``."""
    phase = (pod.get("status") or {}).get("phase")
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and phase not in {"Succeeded", "Failed"}


class NodeFailures:
    def __init__(
        self,
        state: ControllerState,
        writer: ApiWriter,
        decisions: DecisionWriter,
        nodes: Reflector[dict[str, Any]],
        pods: Reflector[dict[str, Any]],
    ) -> None:
        self._state = state
        self._writer = writer
        self._decisions = decisions
        self._nodes = nodes
        self._pods = pods
        self.dirty: set[str] = set()  # node names to look at again

    def on_node(self, event: Event[dict[str, Any]]) -> None:
        self.dirty.add(event.key)

    def on_pod(self, event: Event[dict[str, Any]]) -> None:
        """A TAS pod that ends or starts being deleted may be the last one running on a failed node."""
        node = (event.value.get("spec") or {}).get("nodeName")
        if node:
            self.dirty.add(node)
            if event.type is not EventType.ADDED:
                self._state.wake.set()

    async def replace(self, now: float) -> None:
        """Each admitted TAS Workload's failed nodes replaced, or the Workload evicted."""
        names, self.dirty = self.dirty, set()
        # A Ready node without a taint that keeps pods off fails no Workload: most changes end here.
        suspects = sorted(name for name in names if _may_have_failed(self._nodes.get(name)))
        if not suspects:
            return
        engine = self._state.engine
        pods = pods_by_workload(self._pods.values())
        for key in sorted(engine.workloads()):
            admission = engine.admission(key)
            parsed = self._state.parsed.get(key)
            obj = self._state.workloads.get(key)
            if admission is None or parsed is None or obj is None:
                continue
            failed = []
            for name in suspects:
                placed = _placed_on(name, admission.assignment.pod_sets)
                tolerations = [self._tolerations(parsed, pod_set) for pod_set in placed]
                on_node = [pod for pod in pods.get(key, ()) if (pod.get("spec") or {}).get("nodeName") == name]
                if placed and has_failed(self._nodes.get(name), tolerations, on_node):
                    failed.append(name)
            if not failed:
                continue
            several = multiple_failures(status.unhealthy_nodes(obj), failed)
            if several:
                await self._evict_for_multiple_failures(key, obj, several, now)
            else:
                await self._replace(key, failed[0], now)

    def _tolerations(self, workload: Workload, assigned: PodSetAssignment) -> tuple[Toleration, ...]:
        pod_set = next(p for p in workload.pod_sets if p.name == assigned.name)
        flavors = self._state.engine.flavors
        return pod_set.tolerations + tuple(
            toleration
            for name in sorted(set(assigned.flavors.values()))
            if name in flavors
            for toleration in flavors[name].tolerations
        )

    async def _replace(self, key: str, node: str, now: float) -> None:
        state = self._state
        obj = state.workloads.get(key)
        if obj is None:
            return
        log.info("node %s failed for workload %s; looking for a replacement", node, key)
        marked = await self._write(key, {"unhealthyNodes": [{"name": node}]}, obj)
        if marked is None:
            return
        try:
            replaced = state.engine.replace_node(key, node)
        except EngineError as error:
            log.error("node %s of workload %s not replaced: %s", node, key, error)
            return
        if isinstance(replaced, str):
            log.info("workload %s: no replacement for node %s: %s", key, node, replaced)
            await self._decisions.write_eviction(state.engine.evict(key, EvictionReason.NODE_FAILURES, now))
            return
        topologies = {pod_set.name: pod_set.topology for pod_set in replaced}
        admission = dict(marked["status"]["admission"])
        admission["podSetAssignments"] = [
            {**assigned, "topologyAssignment": topology_assignment.encode(topology)}
            if (topology := topologies.get(assigned["name"])) is not None
            else assigned
            for assigned in admission["podSetAssignments"]
        ]
        if await self._write(key, {"admission": admission, "unhealthyNodes": None}, marked) is None:
            return
        log.info("workload %s: the pods of node %s moved", key, node)

    async def _evict_for_multiple_failures(
        self, key: str, obj: Mapping[str, Any], nodes: list[str], now: float
    ) -> None:
        """Kueue's ``evictWorkloadIfNeeded``: every failed node recorded, then the Workload evicted, its message
        naming them all (``workload_status.eviction_cause``)."""
        log.info("workload %s: nodes %s failed before a replacement; evicting", key, ", ".join(nodes))
        if await self._write(key, {"unhealthyNodes": [{"name": node} for node in nodes]}, obj) is None:
            return
        await self._decisions.write_eviction(self._state.engine.evict(key, EvictionReason.NODE_FAILURES, now))

    async def _write(self, key: str, fields: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any] | None:
        namespace, name = key.split("/", 1)
        try:
            written = await self._writer.merge_patch(
                WORKLOADS, namespace, name, status.status_patch(obj, fields), "status"
            )
        except ApiWriteError as error:
            log.warning("workload %s: node replacement not written: %s", key, error)
            # The engine may hold a placement the API does not show: rebuilt, it looks at every node again.
            self._state.needs_rebuild = True
            self._state.wake.set()
            return None
        self._state.workloads.wrote(written)
        return written


def multiple_failures(unhealthy: Iterable[str], failed: Iterable[str]) -> list[str]:
    """The nodes a Workload is evicted for when a node fails while another of its failed nodes (``unhealthy``,
    its ``status.unhealthyNodes``) is not yet replaced, the recorded ones first, as Kueue's node controller
    names them; empty when at most one node is unreplaced, which is replaced. ``failed``: the nodes found failed
    in this pass (several at once fail one after another in Kueue, before its scheduler replaces the first)."""
    nodes = list(dict.fromkeys([*unhealthy, *failed]))
    return nodes if len(nodes) > 1 else []


def _placed_on(node: str, pod_sets: Iterable[PodSetAssignment]) -> list[PodSetAssignment]:
    """The pod sets whose topology assignment puts pods on ``node`` (named by its hostname value, the last)."""
    return [
        pod_set
        for pod_set in pod_sets
        if pod_set.topology is not None and any(values[-1] == node for values, _ in pod_set.topology.domains)
    ]
