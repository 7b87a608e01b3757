"""Reading a manager's cost: /proc figures and the API server's per-FlowSchema request counter."""

from __future__ import annotations

import pytest

from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.process_usage import (
    MANAGER_GROUP,
    WRITE_VERBS,
    busiest,
    cpu_seconds_from_stat,
    dispatched_requests,
    flow_schema_name,
    manager_identity_objects,
    peak_rss_mib_from_status,
    requests_by_kind,
    writes_flow_schema_name,
)


def test_cpu_seconds_are_utime_plus_stime_even_when_the_name_has_spaces_and_parentheses() -> None:
    stat = "4242 (kueue (v0) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
    assert cpu_seconds_from_stat(stat, clock_ticks=100) == pytest.approx(3.0)


def test_a_truncated_stat_line_is_an_error() -> None:
    with pytest.raises(MeasureError, match="too short"):
        cpu_seconds_from_stat("1 (x) S 1 2", clock_ticks=100)


def test_peak_rss_is_vmhwm_in_mib() -> None:
    status = "Name:\tkueue\nVmPeak:\t 900000 kB\nVmHWM:\t  102400 kB\nVmRSS:\t   51200 kB\n"
    assert peak_rss_mib_from_status(status) == 100.0


def test_no_vmhwm_is_an_error_not_a_zero() -> None:
    with pytest.raises(MeasureError, match="VmHWM"):
        peak_rss_mib_from_status("Name:\tgone\n")


def test_requests_are_summed_over_priority_levels_for_one_flow_schema_only() -> None:
    counter = "apiserver_flowcontrol_dispatched_requests_total"
    gauge = "apiserver_flowcontrol_current_executing_requests"
    metrics = "\n".join(
        [
            f"# TYPE {counter} counter",
            f'{counter}{{flow_schema="bench-kueue-manager",priority_level="exempt"}} 1200',
            f'{counter}{{flow_schema="bench-kueue-manager",priority_level="other"}} 3',
            f'{counter}{{flow_schema="bench-kueue-manager-2",priority_level="exempt"}} 9',
            f'{counter}{{flow_schema="exempt",priority_level="exempt"}} 77',
            f'{gauge}{{flow_schema="bench-kueue-manager",priority_level="exempt"}} 5',
        ]
    )
    assert dispatched_requests(metrics, "bench-kueue-manager") == 1203


def test_a_schema_that_dispatched_nothing_counts_zero_requests() -> None:
    assert dispatched_requests("", "bench-kuota-manager") == 0


def test_the_flow_schema_matches_the_manager_user_and_its_group_is_cluster_admin() -> None:
    binding, _, schema = manager_identity_objects("kueue-manager")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": MANAGER_GROUP}]
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert schema["metadata"]["name"] == flow_schema_name("kueue-manager")
    assert schema["spec"]["matchingPrecedence"] > 1  # 1 is reserved for the mandatory 'exempt' schema
    assert schema["spec"]["rules"][0]["subjects"] == [{"kind": "User", "user": {"name": "kueue-manager"}}]


def test_traffic_is_grouped_by_verb_and_resource_and_ranked_by_growth() -> None:
    def reading(patches: int, creates: int) -> str:
        line = 'apiserver_request_total{{code="{code}",component="apiserver",group="kueue.x-k8s.io",resource="{r}",scope="namespace",subresource="{s}",verb="{v}",version="v1beta2"}} {n}'  # noqa: E501
        return "\n".join(
            [
                line.format(code="200", r="workloads", s="status", v="PATCH", n=patches),
                line.format(code="409", r="workloads", s="status", v="PATCH", n=1),
                line.format(code="201", r="workloads", s="", v="POST", n=creates),
            ]
        )

    before, after = requests_by_kind(reading(10, 5)), requests_by_kind(reading(40, 6))
    assert before == {"PATCH workloads/status": 11, "POST workloads": 5}
    assert busiest(before, after, 1) == [("PATCH workloads/status", 30)]
    assert busiest(before, after, 5) == [("PATCH workloads/status", 30), ("POST workloads", 1)]


def test_the_managers_writes_are_counted_apart_and_matched_before_its_other_requests() -> None:
    _, writes, everything = manager_identity_objects("kuota-manager")
    assert writes["metadata"]["name"] == writes_flow_schema_name("kuota-manager") != flow_schema_name("kuota-manager")
    assert writes["spec"]["matchingPrecedence"] < everything["spec"]["matchingPrecedence"]
    (rule,) = writes["spec"]["rules"]
    assert rule["subjects"] == [{"kind": "User", "user": {"name": "kuota-manager"}}]
    assert [r["verbs"] for r in rule["resourceRules"]] == [list(WRITE_VERBS)]
    assert "get" not in WRITE_VERBS and "list" not in WRITE_VERBS and "watch" not in WRITE_VERBS
    assert "nonResourceRules" not in rule
