"""The PrometheusRule's expressions are valid PromQL and fire on exactly the situations they name (promtool)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.chart.rendering import VALUES_SETS, Rendered, render


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: install Debian's prometheus package (make system-packages)"
    return found


def _rule_groups(rendered: Rendered) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = rendered.one("PrometheusRule")["spec"]["groups"]
    return groups


def _promtool_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_the_rules_pass_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _rule_groups(render(VALUES_SETS["monitoring"]))}))
    result = _promtool_run("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout


def test_exporter_off_drops_the_exporter_alerts() -> None:
    groups = _rule_groups(render(VALUES_SETS["monitoring"] | VALUES_SETS["exporter-off"]))
    alerts = {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}
    assert alerts == {"KuotaWebhookUnavailable", "KuotaWorkloadsPendingTooLong"}


def _series(labels: str, values: str) -> dict[str, str]:
    return {"series": labels, "values": values}


CHECK_MANAGER = (
    "Jobs in managed namespaces are rejected (failurePolicy Fail) or admitted without quota (Ignore). "
    "Check `kubectl -n kuota-system get pods -l app.kubernetes.io/component=manager` and the manager's log."
)
WEBHOOK_SUMMARY = "kuota's admission webhook is unavailable"


def _webhook_alert(labels: dict[str, str], cause: str) -> dict[str, Any]:
    return {
        "exp_labels": {**labels, "severity": "critical"},
        "exp_annotations": {"summary": WEBHOOK_SUMMARY, "description": f"{cause}. {CHECK_MANAGER}"},
    }


GPU = 'Hostname="gpu-1", gpu="0", UUID="GPU-a", container="c", job="kuota-exporter", instance="10.0.0.1:9400"'

# Scenarios on a 1-minute grid; each names what must (and must not) fire.
RULE_TESTS: list[dict[str, Any]] = [
    {
        "name": "an allocated GPU idle for the threshold alerts; a busy one and an idle unallocated one do not",
        "interval": "1m",
        "input_series": [
            _series(f'kuota_pod_gpu_sm_utilization_percent{{{GPU}, namespace="research", pod="notebook"}}', "1x300"),
            _series(f'kuota_gpu_allocated{{{GPU}, namespace="research", pod="notebook"}}', "1x300"),
            _series(f'kuota_pod_gpu_sm_utilization_percent{{{GPU}, namespace="research", pod="trainer"}}', "89x300"),
            _series(f'kuota_gpu_allocated{{{GPU}, namespace="research", pod="trainer"}}', "1x300"),
            _series(f'kuota_pod_gpu_sm_utilization_percent{{{GPU}, namespace="research", pod="stray"}}', "0x300"),
        ],
        "alert_rule_test": [
            {"eval_time": "2h", "alertname": "KuotaGpuAllocatedButIdle", "exp_alerts": []},
            {
                "eval_time": "4h",
                "alertname": "KuotaGpuAllocatedButIdle",
                "exp_alerts": [
                    {
                        "exp_labels": {
                            "Hostname": "gpu-1",
                            "gpu": "0",
                            "UUID": "GPU-a",
                            "container": "c",
                            "job": "kuota-exporter",
                            "instance": "10.0.0.1:9400",
                            "namespace": "research",
                            "pod": "notebook",
                            "severity": "info",
                        },
                        "exp_annotations": {
                            "summary": "research/notebook holds a GPU it barely uses",
                            "description": "research/notebook (container c) has held GPU 0 on gpu-1 for 3h "
                            "at under 5% SM use. Stop it or release the GPU so queued work can run.",
                        },
                    }
                ],
            },
        ],
        "promql_expr_test": [
            {
                "expr": "namespace:kuota_pod_gpu_sm_utilization_percent:avg",
                "eval_time": "10m",
                "exp_samples": [
                    {"labels": 'namespace:kuota_pod_gpu_sm_utilization_percent:avg{namespace="research"}', "value": 30}
                ],
            },
            {
                "expr": "namespace:kuota_gpu_allocated:sum",
                "eval_time": "10m",
                "exp_samples": [{"labels": 'namespace:kuota_gpu_allocated:sum{namespace="research"}', "value": 2}],
            },
        ],
    },
    {
        "name": "a queue that admits nothing for the threshold alerts; one that keeps admitting does not",
        "interval": "1m",
        "input_series": [
            _series('kueue_pending_workloads{cluster_queue="research", status="active"}', "3x200"),
            _series('kueue_pending_workloads{cluster_queue="inference", status="active"}', "3x200"),
            _series('kueue_admitted_workloads_total{cluster_queue="inference", priority_class=""}', "0+1x200"),
            _series('up{job="kuota-manager", instance="a"}', "1x200"),
        ],
        "alert_rule_test": [
            {"eval_time": "90m", "alertname": "KuotaWorkloadsPendingTooLong", "exp_alerts": []},
            {
                "eval_time": "150m",
                "alertname": "KuotaWorkloadsPendingTooLong",
                "exp_alerts": [
                    {
                        "exp_labels": {"cluster_queue": "research", "severity": "warning"},
                        "exp_annotations": {
                            "summary": "ClusterQueue research admitted nothing for 2h",
                            "description": "3 or more workloads have been pending in ClusterQueue research "
                            "for 2h and none was admitted. `kubectl get workloads -A` shows why "
                            "(conditions QuotaReserved and Admitted).",
                        },
                    }
                ],
            },
            {"eval_time": "150m", "alertname": "KuotaWebhookUnavailable", "exp_alerts": []},
        ],
    },
    {
        "name": "no manager up, or the API server failing to call the webhook, alerts",
        "interval": "1m",
        "input_series": [
            _series('up{job="kuota-manager", instance="a"}', "1x10 0x30"),
            _series(
                'apiserver_admission_webhook_rejection_count{name="mjob.kuota.dev", '
                'error_type="calling_webhook_error", type="admit", operation="CREATE", rejection_code="500"}',
                "0x45 0+5x30",
            ),
        ],
        "alert_rule_test": [
            {"eval_time": "9m", "alertname": "KuotaWebhookUnavailable", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "KuotaWebhookUnavailable",
                "exp_alerts": [_webhook_alert({}, "No kuota manager replica is up")],
            },
            {
                "eval_time": "55m",
                "alertname": "KuotaWebhookUnavailable",
                "exp_alerts": [
                    _webhook_alert({}, "No kuota manager replica is up"),
                    _webhook_alert({"name": "mjob.kuota.dev"}, "The API server cannot call webhook mjob.kuota.dev"),
                ],
            },
        ],
    },
    {
        "name": "an exporter target down for the threshold alerts",
        "interval": "1m",
        "input_series": [_series('up{job="kuota-exporter", instance="10.0.0.1:9400", node="gpu-1"}', "1x5 0x20")],
        "alert_rule_test": [
            {"eval_time": "10m", "alertname": "KuotaExporterDown", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "KuotaExporterDown",
                "exp_alerts": [
                    {
                        "exp_labels": {
                            "job": "kuota-exporter",
                            "instance": "10.0.0.1:9400",
                            "node": "gpu-1",
                            "severity": "warning",
                        },
                        "exp_annotations": {
                            "summary": "kuota's GPU exporter on gpu-1 is down",
                            "description": "Prometheus cannot scrape 10.0.0.1:9400: that node's GPU utilization is not "
                            "measured, and the weekly report will have a gap. Check the exporter pod on gpu-1.",
                        },
                    }
                ],
            },
        ],
    },
]


def test_the_alerts_fire_on_the_situations_they_name(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _rule_groups(render(VALUES_SETS["monitoring"]))}))
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": RULE_TESTS})
    )
    result = _promtool_run("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


WAIT_QUANTILES = "cluster_queue_quantile:kueue_admission_wait_time_seconds:histogram_quantile"


def test_the_wait_quantiles_are_recorded_per_cluster_queue(tmp_path: Path) -> None:
    buckets = [
        _series(f'kueue_admission_wait_time_seconds_bucket{{cluster_queue="research", le="{le}"}}', f"0+{rate}x120")
        for le, rate in (("10", 5), ("60", 9), ("+Inf", 10))
    ]
    tests = [
        {
            "interval": "1m",
            "input_series": buckets,
            "promql_expr_test": [
                {
                    "expr": f'{WAIT_QUANTILES}{{quantile="0.5"}}',
                    "eval_time": "90m",
                    "exp_samples": [
                        {
                            "labels": "cluster_queue_quantile:kueue_admission_wait_time_seconds:histogram_quantile"
                            '{cluster_queue="research", quantile="0.5"}',
                            "value": 10,
                        }
                    ],
                }
            ],
        }
    ]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _rule_groups(render(VALUES_SETS["monitoring"]))}))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    result = _promtool_run("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("jobs", [{}, {"manager": "kuota-controller", "exporter": "gpu-metrics"}])
def test_every_dashboard_query_is_valid_promql_on_the_configured_jobs(tmp_path: Path, jobs: dict[str, str]) -> None:
    values = VALUES_SETS["monitoring"] | {"monitoring": {**VALUES_SETS["monitoring"]["monitoring"], "jobs": jobs}}
    config_map = render(values).one("ConfigMap", "kuota-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["kuota-overview.json"])
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert expressions and "__" not in " ".join(expr for expr in expressions if "job=" in expr).replace("__all", "")
    for job in jobs.values():
        assert any(f'job="{job}"' in expr for expr in expressions)
    # Grafana's variables become plain regexes so promtool can parse each query as a recording rule.
    rules = [
        {"record": f"dashboard:query_{index}", "expr": expr.replace("$namespace", ".*").replace("$cluster_queue", ".*")}
        for index, expr in enumerate(expressions)
    ]
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = _promtool_run("check", "rules", "dashboard.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_scrape_configs_set_the_job_label_the_rules_select_on_and_keep_the_holders_labels() -> None:
    rendered = render(VALUES_SETS["monitoring"])
    for kind, endpoints in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        by_name = {m["metadata"]["name"]: m["spec"][endpoints][0] for m in rendered.of_kind(kind)}
        assert sorted(by_name) == ["kuota-exporter", "kuota-manager"]
        for name, endpoint in by_name.items():
            assert {"action": "replace", "targetLabel": "job", "replacement": name} in endpoint["relabelings"]
            assert endpoint["port"] == "metrics"
        exporter = by_name["kuota-exporter"]
        assert exporter["honorLabels"] is True
        assert {"action": "labeldrop", "regex": "namespace|pod|container"} in exporter["relabelings"]


def test_relabelings_and_metric_relabelings_are_added_per_component_after_the_charts_own() -> None:
    drop_bus = {"action": "labeldrop", "regex": "pci_bus_id|DCGM_FI_DRIVER_VERSION"}
    add_cluster = {"action": "replace", "targetLabel": "cluster", "replacement": "gpu-west"}
    keep_queues = {"action": "keep", "sourceLabels": ["__name__"], "regex": "kueue_.*|kuota_.*"}
    per_kind = {
        "enabled": True,
        "relabelings": {"exporter": [add_cluster]},
        "metricRelabelings": {"exporter": [drop_bus], "manager": [keep_queues]},
    }
    rendered = render({"monitoring": {"serviceMonitor": per_kind, "podMonitor": per_kind}})
    for kind, endpoints in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        by_name = {m["metadata"]["name"]: m["spec"][endpoints][0] for m in rendered.of_kind(kind)}
        exporter, manager = by_name["kuota-exporter"], by_name["kuota-manager"]
        assert exporter["relabelings"][-1] == add_cluster
        assert {"action": "labeldrop", "regex": "namespace|pod|container"} in exporter["relabelings"]
        assert exporter["metricRelabelings"] == [drop_bus]
        assert manager["metricRelabelings"] == [keep_queues]
        assert add_cluster not in manager["relabelings"]
    defaults = render(VALUES_SETS["monitoring"])
    for monitor in defaults.of_kind("ServiceMonitor") + defaults.of_kind("PodMonitor"):
        endpoint = (monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"])[0]
        assert "metricRelabelings" not in endpoint


def test_the_manager_is_scraped_over_https_with_the_scrapers_token_and_the_serving_ca() -> None:
    rendered = render(VALUES_SETS["monitoring"])
    scraper = rendered.one("ServiceAccount", "kuota-metrics-scraper")
    token = rendered.one("Secret", "kuota-metrics-scraper")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": scraper["metadata"]["name"]}
    assert rendered.one("ClusterRole", "kuota-metrics-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    binding = rendered.one("ClusterRoleBinding", "kuota-metrics-scraper")
    assert binding["roleRef"]["name"] == "kuota-metrics-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kuota-metrics-scraper", "namespace": "kuota-system"}
    ]
    for kind, endpoints in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        by_name = {m["metadata"]["name"]: m["spec"][endpoints][0] for m in rendered.of_kind(kind)}
        manager = by_name["kuota-manager"]
        assert manager["scheme"] == "https"
        assert manager["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": "kuota-metrics-scraper", "key": "token"},
        }
        assert manager["tlsConfig"] == {
            "ca": {"secret": {"name": "kuota-webhook-tls", "key": "ca.crt"}},
            "serverName": "kuota-webhook.kuota-system.svc",
        }
        assert "scheme" not in by_name["kuota-exporter"]


def test_plain_http_metrics_keep_the_old_scrape_and_need_no_review_rights() -> None:
    rendered = render(VALUES_SETS["monitoring"] | {"manager": {"secureMetrics": False}})
    assert (
        "--no-metrics-secure"
        in rendered.one("Deployment", "kuota-manager")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert not [role for role in rendered.of_kind("ClusterRole") if role["metadata"]["name"] == "kuota-metrics-reader"]
    manager_role = rendered.one("ClusterRole", "kuota-manager")
    assert not [rule for rule in manager_role["rules"] if "tokenreviews" in rule.get("resources", [])]
    for monitor in rendered.of_kind("ServiceMonitor") + rendered.of_kind("PodMonitor"):
        endpoint = (monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"])[0]
        assert "scheme" not in endpoint and "authorization" not in endpoint
