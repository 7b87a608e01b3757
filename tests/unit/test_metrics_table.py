"""The committed metrics table is the one the real expositions give, and the manager's Kueue-named metrics are
Kueue's: names, types, labels, label values and buckets as Kueue v0.17 declares them in
``pkg/metrics/metrics.go`` (``InitMetricVectors``), each Kueue metric either exported or listed as absent with why.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.metrics_table import TABLE, manager_exposition, render, rows

# metrics.go: generateExponentialBuckets(n) = [1] + prometheus.ExponentialBuckets(2.5, 2, n-1); no Buckets
# means client_golang's DefBuckets.
_GEN14 = ("1", "2.5", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120", "10240")
_GEN16 = (*_GEN14, "20480", "40960")
_DEF = ("0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10")
_CQ = ("cluster_queue", "priority_class", "replica_role")
_LQ = ("name", "namespace", "priority_class", "replica_role")
_QUOTA = ("cohort", "cluster_queue", "flavor", "resource", "replica_role")
_LQ_QUOTA = ("name", "namespace", "flavor", "resource", "replica_role")
_EVICTION = ("reason", "underlying_cause", "priority_class", "replica_role")

KUEUE: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "kueue_admission_attempts_total": ("counter", ("result", "replica_role"), ()),
    "kueue_admission_attempt_duration_seconds": ("histogram", ("result", "replica_role"), _DEF),
    "kueue_admission_cycle_preemption_skips": ("gauge", ("cluster_queue", "replica_role"), ()),
    "kueue_build_info": (
        "gauge",
        ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"),
        (),
    ),
    "kueue_pending_workloads": ("gauge", ("cluster_queue", "status", "replica_role"), ()),
    "kueue_local_queue_pending_workloads": ("gauge", ("name", "namespace", "status", "replica_role"), ()),
    "kueue_finished_workloads": ("gauge", ("cluster_queue", "replica_role"), ()),
    "kueue_local_queue_finished_workloads": ("gauge", ("name", "namespace", "replica_role"), ()),
    "kueue_quota_reserved_workloads_total": ("counter", _CQ, ()),
    "kueue_local_queue_quota_reserved_workloads_total": ("counter", _LQ, ()),
    "kueue_finished_workloads_total": ("counter", _CQ, ()),
    "kueue_local_queue_finished_workloads_total": ("counter", _LQ, ()),
    "kueue_quota_reserved_wait_time_seconds": ("histogram", _CQ, _GEN14),
    "kueue_pods_ready_to_evicted_time_seconds": (
        "histogram",
        ("cluster_queue", "reason", "underlying_cause", "replica_role"),
        _GEN14,
    ),
    "kueue_local_queue_quota_reserved_wait_time_seconds": ("histogram", _LQ, _GEN14),
    "kueue_admitted_workloads_total": ("counter", _CQ, ()),
    "kueue_local_queue_admitted_workloads_total": ("counter", _LQ, ()),
    "kueue_admission_wait_time_seconds": ("histogram", _CQ, _GEN16),
    "kueue_ready_wait_time_seconds": ("histogram", _CQ, _GEN14),
    "kueue_admitted_until_ready_wait_time_seconds": ("histogram", _CQ, _GEN14),
    "kueue_local_queue_admission_wait_time_seconds": ("histogram", _LQ, _GEN14),
    "kueue_admission_checks_wait_time_seconds": ("histogram", _CQ, _GEN14),
    "kueue_local_queue_admission_checks_wait_time_seconds": ("histogram", _LQ, _GEN14),
    "kueue_local_queue_ready_wait_time_seconds": ("histogram", _LQ, _GEN14),
    "kueue_local_queue_admitted_until_ready_wait_time_seconds": ("histogram", _LQ, _GEN14),
    "kueue_evicted_workloads_total": ("counter", ("cluster_queue", *_EVICTION), ()),
    "kueue_replaced_workload_slices_total": ("counter", ("cluster_queue", "replica_role"), ()),
    "kueue_local_queue_evicted_workloads_total": ("counter", ("name", "namespace", *_EVICTION), ()),
    "kueue_evicted_workloads_once_total": ("counter", ("cluster_queue", *_EVICTION), ()),
    "kueue_preempted_workloads_total": ("counter", ("preempting_cluster_queue", "reason", "replica_role"), ()),
    "kueue_reserving_active_workloads": ("gauge", ("cluster_queue", "replica_role"), ()),
    "kueue_local_queue_reserving_active_workloads": ("gauge", ("name", "namespace", "replica_role"), ()),
    "kueue_admitted_active_workloads": ("gauge", ("cluster_queue", "replica_role"), ()),
    "kueue_local_queue_admitted_active_workloads": ("gauge", ("name", "namespace", "replica_role"), ()),
    "kueue_cluster_queue_status": ("gauge", ("cluster_queue", "status", "replica_role"), ()),
    "kueue_local_queue_status": ("gauge", ("name", "namespace", "active", "replica_role"), ()),
    "kueue_cluster_queue_resource_reservation": ("gauge", _QUOTA, ()),
    "kueue_cluster_queue_resource_usage": ("gauge", _QUOTA, ()),
    "kueue_local_queue_resource_reservation": ("gauge", _LQ_QUOTA, ()),
    "kueue_local_queue_resource_usage": ("gauge", _LQ_QUOTA, ()),
    "kueue_cluster_queue_nominal_quota": ("gauge", _QUOTA, ()),
    "kueue_cluster_queue_borrowing_limit": ("gauge", _QUOTA, ()),
    "kueue_cluster_queue_lending_limit": ("gauge", _QUOTA, ()),
    "kueue_cluster_queue_weighted_share": ("gauge", ("cluster_queue", "cohort", "replica_role"), ()),
    "kueue_cohort_weighted_share": ("gauge", ("cohort", "replica_role"), ()),
    "kueue_cohort_subtree_quota": ("gauge", ("cohort", "flavor", "resource", "replica_role"), ()),
    "kueue_cohort_subtree_admitted_workloads_total": ("counter", ("cohort", "priority_class", "replica_role"), ()),
    "kueue_cohort_subtree_resource_reservations": ("gauge", ("cohort", "flavor", "resource", "replica_role"), ()),
    "kueue_cohort_subtree_admitted_active_workloads": ("gauge", ("cohort", "replica_role"), ()),
}
# What Kueue exports and kuota does not, and why (docs/metrics.md says the same).
ABSENT = {
    "kueue_admission_cycle_preemption_skips": "the engine reports no preemption candidates skipped in a cycle",
    "kueue_admission_checks_wait_time_seconds": "kuota has no AdmissionChecks: admission is the reservation",
    "kueue_local_queue_admission_checks_wait_time_seconds": "kuota has no AdmissionChecks",
    "kueue_replaced_workload_slices_total": "kuota has no workload slices (elastic Jobs)",
}
# Label values Kueue gives (metrics.go's constants, roletracker's roles).
KUEUE_VALUES = {
    "replica_role": {"leader", "follower", "standalone"},
    "result": {"success", "inadmissible"},
    ("kueue_pending_workloads", "status"): {"active", "inadmissible"},
    ("kueue_local_queue_pending_workloads", "status"): {"active", "inadmissible"},
    ("kueue_cluster_queue_status", "status"): {"pending", "active", "terminating"},
    ("kueue_local_queue_status", "active"): {"True", "False", "Unknown"},
    "underlying_cause": {
        "",
        "WaitForStart",
        "WaitForRecovery",
        "AdmissionCheck",
        "MaximumExecutionTimeExceeded",
        "RequeuingLimitExceeded",
    },
}


def test_the_committed_metrics_table_is_the_generated_one() -> None:
    assert TABLE.read_text() == render(), "docs/metrics-table.md is stale: run `python -m tests.metrics_table`"


def test_every_manager_metric_has_a_sample_so_its_labels_show_in_the_table() -> None:
    empty = [
        family.name
        for family in text_string_to_metric_families(manager_exposition())
        if not family.name.endswith("_created") and not family.samples
    ]
    assert empty == [], "drive these in tests/metrics_table.manager_exposition"


def test_the_kueue_named_metrics_are_kueues() -> None:
    exported = {row.series: row for row in rows(manager_exposition()) if row.series.startswith("kueue_")}
    assert set(exported) | set(ABSENT) == set(KUEUE)
    assert set(exported) & set(ABSENT) == set()
    for name, row in exported.items():
        kind, labels, buckets = KUEUE[name]
        assert (row.kind, row.labels, row.buckets) == (kind, tuple(sorted(labels)), buckets), name


def test_the_kueue_named_metrics_use_kueues_label_values() -> None:
    for family in text_string_to_metric_families(manager_exposition()):
        if not family.name.startswith("kueue_"):
            continue
        for sample in family.samples:
            for label, value in sample.labels.items():
                allowed = KUEUE_VALUES.get((family.name, label), KUEUE_VALUES.get(label))
                assert allowed is None or value in allowed, (family.name, label, value)
