"""The exporter DaemonSet and the report CronJob run the real CLI with the host access and volumes they need."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

from tests.unit.chart.rendering import VALUES_SETS, pod_spec, render
from tests.unit.chart.test_manager import parse_with_the_cli


def _exporter_spec(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return pod_spec(render(values).one("DaemonSet", "kuota-exporter"))


def test_the_exporter_runs_with_host_pids_read_only_host_paths_and_its_node_name() -> None:
    spec = _exporter_spec()
    # One way to see host processes: hostPID (its /proc keeps the runtime's masked paths), not also /proc mounted.
    assert spec["hostPID"] is True
    container = spec["containers"][0]
    parsed = parse_with_the_cli(container["args"])
    assert (parsed.node_name, parsed.listen) == ("$(NODE_NAME)", "0.0.0.0:9400")
    assert str(parsed.proc_root) == "/proc"
    assert str(parsed.pod_resources_socket) == "/var/lib/kubelet/pod-resources/kubelet.sock"
    env = {item["name"]: item for item in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert [v["hostPath"]["path"] for v in volumes.values() if "hostPath" in v] == ["/var/lib/kubelet/pod-resources"]
    assert mounts["/var/lib/kubelet/pod-resources"]["readOnly"] is True
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert (security["allowPrivilegeEscalation"], security["readOnlyRootFilesystem"], security["privileged"]) == (
        False,
        True,
        False,
    )
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_the_exporter_stays_on_gpu_nodes_and_tolerates_their_taint() -> None:
    spec = _exporter_spec()
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert "runtimeClassName" not in spec


def test_exporter_placement_and_runtime_class_come_from_values() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu-type", "operator": "In", "values": ["h100"]}]}]
            }
        }
    }
    # null removes the default's key (Helm merges maps).
    selector = {"nvidia.com/gpu.present": None, "gpu-type": "h100"}
    spec = _exporter_spec(
        {"exporter": {"runtimeClassName": "nvidia", "nodeSelector": selector, "affinity": affinity, "tolerations": []}}
    )
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"gpu-type": "h100"}
    assert spec["affinity"] == affinity
    assert "tolerations" not in spec


def test_exporter_off_renders_no_exporter_object() -> None:
    rendered = render(VALUES_SETS["exporter-off"] | VALUES_SETS["monitoring"])
    assert not [o for o in rendered.objects if "exporter" in o["metadata"]["name"]]


def _report_containers(values: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spec = pod_spec(render(values).one("CronJob", "kuota-report"))
    return spec, spec.get("initContainers", []) + spec["containers"]


def test_the_report_command_parses_with_the_cli_and_writes_into_the_volume() -> None:
    spec, containers = _report_containers(VALUES_SETS["report"])
    report = next(c for c in containers if c["name"] == "report")
    script = report["command"][2]
    env = {item["name"]: item.get("value") for item in report["env"]}
    line = next(line for line in script.splitlines() if line.startswith("kuota report"))
    words = shlex.split(line.replace("$run", "2026-01-05T0600Z").replace('"$@"', ""))
    words = [env.get(w.lstrip("$"), w) if w.startswith("$") else w for w in words]
    parsed = parse_with_the_cli(words[1:])
    assert parsed.prometheus == "http://prometheus.monitoring:9090"
    assert (parsed.window, parsed.price, parsed.config) == ("7d", ["p5.48xlarge"], "/etc/kuota-report/queues")
    assert parsed.in_cluster, "the report reads the retained Workloads with its service account"
    assert parsed.out == "/report/2026-01-05T0600Z"
    assert {"name": "report", "mountPath": "/report"} in report["volumeMounts"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["report"]["persistentVolumeClaim"]["claimName"] == "kuota-report"
    assert volumes["queues"]["configMap"]["name"] == "kuota-queues"


def test_each_run_compares_itself_with_the_last_kept_report(tmp_path: Path) -> None:
    """The rendered script, run by sh twice on one volume: the second run gets --previous of the first's report."""
    _, containers = _report_containers(VALUES_SETS["report"])
    report = next(c for c in containers if c["name"] == "report")
    volume = tmp_path / "report"
    volume.mkdir()
    script = report["command"][2].replace("/report/", f"{volume}/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    # Records its arguments and writes report.json into --out, as `kuota report` does.
    fake = bin_dir / "kuota"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        'while [ $# -gt 0 ]; do if [ "$1" = --out ]; then mkdir -p "$2"; echo {} > "$2/report.json"; fi; shift; done\n'
    )
    fake.chmod(0o755)
    env = {item["name"]: item.get("value") or "" for item in report["env"]} | {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    for run, date in enumerate(("2026-01-05T0600Z", "2026-01-12T0600Z")):
        dated = script.replace("$(date -u +%Y-%m-%dT%H%MZ)", date)
        subprocess.run(["sh", "-c", dated, "kuota-report"], env=env, check=True, timeout=30)
        assert (volume / "latest").resolve() == volume / date, f"run {run}: latest names the newest"
    first, second = calls.read_text().splitlines()
    assert "--previous" not in first.split(), "nothing to compare with on the first run"
    words = second.split()
    assert words[words.index("--previous") + 1] == f"{volume}/latest/report.json"
    assert words[words.index("--out") + 1] == f"{volume}/2026-01-12T0600Z"


def test_a_summary_webhook_posts_the_report_after_it_is_written() -> None:
    spec, _ = _report_containers(VALUES_SETS["report"])
    assert [c["name"] for c in spec["initContainers"]] == ["report"]
    post = spec["containers"][0]
    assert post["name"] == "post-summary"
    assert "@/report/latest/report.json" in post["command"][2]
    assert {"name": "SUMMARY_WEBHOOK_URL", "value": "https://hooks.example.com/kuota"} in post["env"]


def test_without_a_queue_config_map_the_report_reads_the_live_queues() -> None:
    values = {"report": {"enabled": True, "prometheusUrl": "http://p:9090"}}
    spec, containers = _report_containers(values)
    script = containers[0]["command"][2]
    line = next(line for line in script.splitlines() if line.startswith("kuota report"))
    parsed = parse_with_the_cli(shlex.split(line.replace('"$@"', ""))[1:])
    assert (parsed.in_cluster, parsed.config) == (True, None)
    assert "queues" not in {v["name"] for v in spec["volumes"]}


def test_without_a_summary_webhook_the_report_is_the_only_container() -> None:
    values = {"report": {"enabled": True, "prometheusUrl": "http://p:9090", "storage": {"type": "emptyDir"}}}
    spec, containers = _report_containers(values)
    assert "initContainers" not in spec
    assert [c["name"] for c in containers] == ["report"]
    assert {v["name"]: v for v in spec["volumes"]}["report"] == {"name": "report", "emptyDir": {}}
    assert render(values).of_kind("PersistentVolumeClaim") == []


def test_the_summary_webhook_url_can_come_from_a_secret() -> None:
    values = {
        "report": {
            "enabled": True,
            "prometheusUrl": "http://p:9090",
            "summaryWebhook": {"urlSecret": {"name": "slack", "key": "webhook"}},
        }
    }
    spec, _ = _report_containers(values)
    env = spec["containers"][0]["env"]
    assert env == [{"name": "SUMMARY_WEBHOOK_URL", "valueFrom": {"secretKeyRef": {"name": "slack", "key": "webhook"}}}]


def test_the_exporter_is_node_critical_by_default_as_dcgm_exporters_chart_makes_it() -> None:
    assert _exporter_spec()["priorityClassName"] == "system-node-critical"
    assert _exporter_spec({"exporter": {"priorityClassName": "gpu-telemetry"}})["priorityClassName"] == "gpu-telemetry"
    assert "priorityClassName" not in _exporter_spec({"exporter": {"priorityClassName": ""}})


def test_the_hostname_label_value_reaches_the_exporter_and_the_idle_alert() -> None:
    assert parse_with_the_cli(_exporter_spec()["containers"][0]["args"]).hostname_label == "Hostname"
    values = {"exporter": {"hostnameLabel": "hostname"}} | VALUES_SETS["monitoring"]
    rendered = render(values)
    args = pod_spec(rendered.one("DaemonSet", "kuota-exporter"))["containers"][0]["args"]
    assert parse_with_the_cli(args).hostname_label == "hostname"
    rules = [r for g in rendered.one("PrometheusRule")["spec"]["groups"] for r in g["rules"] if "alert" in r]
    (idle,) = [r for r in rules if "$labels.gpu" in r["annotations"].get("description", "")]
    assert "{{ $labels.hostname }}" in idle["annotations"]["description"]
    assert "$labels.Hostname" not in idle["annotations"]["description"]
