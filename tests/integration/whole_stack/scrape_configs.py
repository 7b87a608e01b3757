"""The chart's ServiceMonitors as the static Prometheus scrape configs prometheus-operator would generate.

prometheus-operator turns each ServiceMonitor endpoint into one scrape config named
``serviceMonitor/<namespace>/<name>/<index>``: Kubernetes endpoint discovery, then its own relabelings (keep
the selected Service's endpoints on the named port; set ``namespace``, ``service``, ``pod``, ``container``,
``endpoint``, and ``job`` to the Service's name), then the endpoint's ``relabelings`` (camelCase keys in the
CRD, snake_case in prometheus.yml; ``metricRelabelings`` likewise), with the endpoint's ``honorLabels``,
``interval``, ``scrapeTimeout``, ``path`` and ``scheme``; the Secrets its ``authorization`` and ``tlsConfig``
name become files, as the operator mounts them into Prometheus. Loopback targets have no discovery, so
:func:`scrape_config` gives each target, as static labels, what that discovery and the operator's relabelings
would have left on it (including the ``__meta_kubernetes_pod_node_name`` a relabeling may read), and appends
the endpoint's relabelings unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# CRD field -> prometheus.yml field of a relabeling
_RELABEL_FIELDS = {
    "sourceLabels": "source_labels",
    "separator": "separator",
    "targetLabel": "target_label",
    "regex": "regex",
    "modulus": "modulus",
    "replacement": "replacement",
    "action": "action",
}


@dataclass(frozen=True)
class Target:
    """One endpoint a ServiceMonitor's Service would list: where it listens and the pod behind it."""

    address: str  # host:port
    pod: str
    container: str
    node: str


def _relabeling(rule: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(rule) - set(_RELABEL_FIELDS)
    if unknown:
        raise AssertionError(f"relabeling {dict(rule)} has fields this translation does not know: {sorted(unknown)}")
    translated = {_RELABEL_FIELDS[key]: value for key, value in rule.items()}
    if "action" in translated:
        translated["action"] = str(translated["action"]).lower()  # the operator accepts either case
    return translated


SecretFile = Callable[[str, str], str]  # (Secret name, key) -> the path of a file holding that key's value


def _secret(selector: Mapping[str, Any], secret_file: SecretFile) -> str:
    return secret_file(selector["name"], selector["key"])


def _security(endpoint: Mapping[str, Any], secret_file: SecretFile) -> dict[str, Any]:
    """``scheme``, ``authorization`` and ``tls_config`` of one endpoint; refuses what it cannot translate."""
    known = {"port", "path", "interval", "scrapeTimeout", "honorLabels", "relabelings", "metricRelabelings"}
    known |= {"scheme", "authorization", "tlsConfig"}
    unknown = set(endpoint) - known
    if unknown:
        raise AssertionError(f"ServiceMonitor endpoint fields this translation does not know: {sorted(unknown)}")
    config: dict[str, Any] = {"scheme": endpoint.get("scheme", "http")}
    authorization = endpoint.get("authorization")
    if authorization is not None:
        config["authorization"] = {
            "type": authorization.get("type", "Bearer"),
            "credentials_file": _secret(authorization["credentials"], secret_file),
        }
    tls = endpoint.get("tlsConfig")
    if tls is not None:
        unknown_tls = set(tls) - {"ca", "serverName", "insecureSkipVerify"}
        if unknown_tls or set(tls.get("ca", {})) - {"secret"}:
            raise AssertionError(f"tlsConfig fields this translation does not know: {dict(tls)}")
        config["tls_config"] = {
            key: value
            for key, value in (
                ("ca_file", _secret(tls["ca"]["secret"], secret_file) if "ca" in tls else None),
                ("server_name", tls.get("serverName")),
                ("insecure_skip_verify", tls.get("insecureSkipVerify")),
            )
            if value is not None
        }
    return config


def scrape_config(
    service_monitor: Mapping[str, Any], service: str, targets: Sequence[Target], secret_file: SecretFile
) -> list[dict[str, Any]]:
    """One scrape config per endpoint of ``service_monitor``, scraping ``targets`` of Service ``service``."""
    namespace = service_monitor["metadata"]["namespace"]
    configs = []
    for index, endpoint in enumerate(service_monitor["spec"]["endpoints"]):
        static = [
            {
                "targets": [target.address],
                "labels": {
                    "namespace": namespace,
                    "service": service,
                    "pod": target.pod,
                    "container": target.container,
                    "endpoint": endpoint["port"],
                    "job": service,
                    "__meta_kubernetes_pod_node_name": target.node,
                },
            }
            for target in targets
        ]
        config: dict[str, Any] = {
            "job_name": f"serviceMonitor/{namespace}/{service_monitor['metadata']['name']}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "metrics_path": endpoint.get("path", "/metrics"),
            "static_configs": static,
            "relabel_configs": [_relabeling(rule) for rule in endpoint.get("relabelings") or []],
            "metric_relabel_configs": [_relabeling(rule) for rule in endpoint.get("metricRelabelings") or []],
            **_security(endpoint, secret_file),
        }
        if "interval" in endpoint:
            config["scrape_interval"] = endpoint["interval"]
        if "scrapeTimeout" in endpoint:
            config["scrape_timeout"] = endpoint["scrapeTimeout"]
        configs.append(config)
    return configs
