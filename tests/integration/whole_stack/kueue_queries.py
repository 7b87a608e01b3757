"""The PromQL of Kueue's "Common Grafana Queries" page (kueue.sigs.k8s.io, docs/tasks/manage/observability,
dated 2026-02-03): what a Kueue user's Grafana panels ask. Each must return data from a Prometheus scraping kuota.

Left out, with why: the week-long ``avg_over_time(...[1w:1h])`` subquery (evaluated on hour boundaries, which a
run of minutes need not cross); ``kueue_pod_scheduling_gate_removal_seconds`` (the Pod integration's gate),
``kueue_admitted_until_ready_wait_time_seconds`` and ``kueue_workload_eviction_latency_seconds`` (not exported:
docs/metrics.md says why).
"""

from __future__ import annotations

CPU_SHARE = (
    '(sum by (cluster_queue) (kueue_cluster_queue_resource_usage{resource="cpu"}))'
    ' / (sum by (cluster_queue) (kueue_cluster_queue_nominal_quota{resource="cpu"})) * 100'
)

QUERIES = {
    "CPU quota used per ClusterQueue": CPU_SHARE,
    "quota used per ClusterQueue and resource": (
        "(sum by (cluster_queue, resource) (kueue_cluster_queue_resource_usage))"
        " / (sum by (cluster_queue, resource) (kueue_cluster_queue_nominal_quota)) * 100"
    ),
    "top 5 ClusterQueues by CPU quota used": f"topk(5, {CPU_SHARE})",
    "pending workloads per ClusterQueue": 'sum by (cluster_queue) (kueue_pending_workloads{status="active"})',
    "pending workloads per ClusterQueue and status": "sum by (cluster_queue, status) (kueue_pending_workloads)",
    **{
        f"p{round(q * 100)} admission wait": (
            f"histogram_quantile({q}, sum by (le, cluster_queue) (rate(kueue_admission_wait_time_seconds_bucket[5m])))"
        )
        for q in (0.95, 0.5, 0.99)
    },
    "admitted per hour": "sum by (cluster_queue) (increase(kueue_admitted_workloads_total[1h]))",
    "finished per hour": "sum by (cluster_queue) (increase(kueue_finished_workloads_total[1h]))",
    "admissions per minute": "sum by (cluster_queue) (rate(kueue_admitted_workloads_total[5m])) * 60",
    "evictions per hour by reason": "sum by (cluster_queue, reason) (increase(kueue_evicted_workloads_total[1h]))",
    "active ClusterQueues": 'kueue_cluster_queue_status{status="active"} == 1',
}
