"""The manager's Deployment, webhooks, configuration and RBAC follow the manager's contract and least privilege."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import yaml

from kuota.cli import build_parser
from kuota.engine.decoding import validate_configuration
from kuota.webhook.admission.endpoints import WebhookEndpoint, webhook_configurations
from kuota.webhook.crds import crd_manifests
from tests.unit.chart.rendering import NAMESPACE, VALUES_SETS, Rendered, pod_spec, render

EXCLUDED = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
    ]
}


def _manager(rendered: Rendered) -> dict[str, Any]:
    container: dict[str, Any] = pod_spec(rendered.one("Deployment", "kuota-manager"))["containers"][0]
    return container


def _flags(args: list[str]) -> dict[str, str | None]:
    pairs = (arg.split("=", 1) if "=" in arg else (arg, None) for arg in args[1:])
    return {flag: value for flag, value in pairs}


def parse_with_the_cli(args: list[str]) -> argparse.Namespace:
    """Parse a container's args as ``kuota`` would; a flag the CLI does not know fails the test."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = commands.choices[args[0]]
    assert not any(action.dest == "rest" for action in sub._actions), f"kuota {args[0]} is still pending"
    parsed = parser.parse_args(args)
    return parsed


def test_webhook_configurations_match_the_admission_plane_registration() -> None:
    rendered = render()
    endpoint = WebhookEndpoint(service_name="kuota-webhook", service_namespace=NAMESPACE, service_port=443)
    expected = webhook_configurations(endpoint, b"", namespace_selector=EXCLUDED)
    for want in expected:
        got = rendered.one(want["kind"], want["metadata"]["name"])
        for webhook in want["webhooks"]:
            del webhook["clientConfig"]["caBundle"]  # injected at run time, never rendered
        assert got["webhooks"] == want["webhooks"], f"{want['kind']} drifted from kuota.webhook.admission.endpoints"


def test_webhooks_take_failure_policy_timeout_and_extra_excluded_namespaces_from_values() -> None:
    rendered = render(
        {"webhook": {"failurePolicy": "Ignore", "timeoutSeconds": 5, "excludedNamespaces": ["batch-legacy"]}}
    )
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in rendered.one(kind)["webhooks"]:
            assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 5)
            if "namespaceSelector" in webhook:
                assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == [
                    "kube-system",
                    NAMESPACE,
                    "batch-legacy",
                ]


def test_manager_flags_are_the_contract_and_parse_with_the_cli() -> None:
    container = _manager(render())
    assert "command" not in container, "the image's ENTRYPOINT (kuota) must run; the chart passes args only"
    args = container["args"]
    assert args[0] == "manager"
    flags = _flags(args)
    assert flags == {
        "--config": "/etc/kuota/config.yaml",
        "--namespace": "$(POD_NAMESPACE)",
        "--identity": "$(POD_NAME)",
        "--webhook-listen": "0.0.0.0:9443",
        "--metrics-listen": "0.0.0.0:8080",
        "--metrics-secure": None,
        "--health-listen": "0.0.0.0:8081",
        "--leader-elect": None,
        "--lease-name": "kuota-manager",
        "--service-name": "kuota-webhook",
        "--workload-retention": "192h",
        "--visibility-serving-label": None,
        "--visibility-api-service": "v1beta1.visibility.kueue.x-k8s.io",  # and v1beta2's: see test_visibility
        "--cert-secret": "kuota-webhook-tls",
        "--mutating-webhook-config": "kuota-mutating-webhook",
        "--validating-webhook-config": "kuota-validating-webhook",
    }
    parsed = parse_with_the_cli(args)
    assert (parsed.namespace, parsed.leader_elect, parsed.cert_dir) == ("$(POD_NAMESPACE)", True, None)
    env = {item["name"]: item["valueFrom"]["fieldRef"]["fieldPath"] for item in container["env"]}
    assert env == {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}


def test_the_names_in_the_manager_flags_are_the_rendered_objects() -> None:
    rendered = render()
    flags = _flags(_manager(rendered)["args"])
    rendered.one("Service", flags["--service-name"])
    rendered.one("MutatingWebhookConfiguration", flags["--mutating-webhook-config"])
    rendered.one("ValidatingWebhookConfiguration", flags["--validating-webhook-config"])
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in rendered.one(kind)["webhooks"]:
            assert webhook["clientConfig"]["service"]["name"] == flags["--service-name"]
    service = rendered.one("Service", flags["--service-name"])
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}]


def test_cert_manager_mode_mounts_the_certificate_and_lets_cert_manager_inject_the_ca() -> None:
    rendered = render(VALUES_SETS["cert-manager"])
    container = _manager(rendered)
    flags = _flags(container["args"])
    assert flags["--cert-dir"] == "/tmp/k8s-webhook-server/serving-certs"
    assert str(parse_with_the_cli(container["args"]).cert_dir) == flags["--cert-dir"]
    assert not {"--cert-secret", "--mutating-webhook-config", "--validating-webhook-config"} & set(flags)
    certificate = rendered.one("Certificate")
    assert certificate["spec"]["secretName"] == "kuota-webhook-tls"
    assert certificate["spec"]["dnsNames"] == [
        f"kuota-webhook.{NAMESPACE}.svc",
        f"kuota-webhook.{NAMESPACE}.svc.cluster.local",
        f"kuota-webhook-conversion.{NAMESPACE}.svc",
        f"kuota-webhook-conversion.{NAMESPACE}.svc.cluster.local",
        f"kuota-webhook-visibility.{NAMESPACE}.svc",
        f"kuota-webhook-visibility.{NAMESPACE}.svc.cluster.local",
    ]
    assert certificate["spec"]["issuerRef"] == {"name": rendered.one("Issuer")["metadata"]["name"], "kind": "Issuer"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = rendered.one(kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{certificate['metadata']['name']}"}
    volumes = {v["name"]: v for v in pod_spec(rendered.one("Deployment"))["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert volumes["serving-certs"]["secret"]["secretName"] == "kuota-webhook-tls"
    assert mounts["serving-certs"] == {"name": "serving-certs", "mountPath": flags["--cert-dir"], "readOnly": True}
    rules = [rule for role in rendered.of_kind("ClusterRole") + rendered.of_kind("Role") for rule in role["rules"]]
    assert not [
        r
        for r in rules
        if {"secrets", "mutatingwebhookconfigurations", "customresourcedefinitions"} & set(r.get("resources", []))
        and set(r["verbs"]) - {"list", "watch"}  # the CRDs' names are watched for kinds installed later
    ], "with cert-manager the manager needs no Secret, webhook configuration or CRD write access"


def test_an_existing_issuer_replaces_the_self_signed_one() -> None:
    ref = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    rendered = render({"webhook": {"certificates": {"mode": "cert-manager", "certManager": {"issuerRef": ref}}}})
    assert rendered.of_kind("Issuer") == []
    assert rendered.one("Certificate")["spec"]["issuerRef"] == ref


@pytest.mark.parametrize("name", ["default", "single-replica"])
def test_the_manager_pod_is_restricted_and_probed(name: str) -> None:
    deployment = render(VALUES_SETS[name]).one("Deployment", "kuota-manager")
    spec = pod_spec(deployment)
    container = spec["containers"][0]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {v["name"]: v for v in spec["volumes"]}["tmp"]["emptyDir"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook": 9443, "metrics": 8080, "health": 8081}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_two_replicas_spread_over_nodes_with_a_disruption_budget() -> None:
    rendered = render()
    deployment = rendered.one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    anti = pod_spec(deployment)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert anti[0]["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": selector},
    }
    budget = rendered.one("PodDisruptionBudget")
    assert budget["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_one_replica_gets_no_budget_that_would_block_drains() -> None:
    rendered = render(VALUES_SETS["single-replica"])
    assert rendered.of_kind("PodDisruptionBudget") == []
    args = _manager(rendered)["args"]
    assert "--no-leader-elect" in args
    assert parse_with_the_cli(args).leader_elect is False


def _configuration(rendered: Rendered) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(rendered.one("ConfigMap", "kuota-manager-config")["data"]["config.yaml"])
    return document


def test_the_configuration_is_one_the_manager_accepts_and_excludes_system_namespaces() -> None:
    config = _configuration(render())
    assert validate_configuration(config) == []
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["kind"] == "Configuration"
    assert config["managedJobsNamespaceSelector"] == EXCLUDED
    assert config["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def test_the_users_configuration_fields_pass_through_and_their_selector_wins() -> None:
    selector = {"matchLabels": {"kuota.dev/managed": "true"}}
    wait = {
        "enable": True,
        "timeout": "30m",
        "requeuingStrategy": {"backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
    }
    values = {
        "managerConfig": {
            "managedJobsNamespaceSelector": selector,
            "waitForPodsReady": wait,
            "manageJobsWithoutQueueName": True,
        }
    }
    config = _configuration(render(values))
    assert validate_configuration(config) == []
    assert config["managedJobsNamespaceSelector"] == selector
    assert config["waitForPodsReady"] == wait
    assert config["manageJobsWithoutQueueName"] is True


def test_a_configuration_change_rolls_the_manager_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        template = render(values).one("Deployment")["spec"]["template"]
        annotation: str = template["metadata"]["annotations"]["checksum/config"]
        return annotation

    assert checksum({}) != checksum({"managerConfig": {"manageJobsWithoutQueueName": True}})


# -- RBAC -------------------------------------------------------------------------------------------------


def _rules(rendered: Rendered, kind: str, name: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = rendered.one(kind, name)["rules"]
    return rules


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(group, resource, verb, resourceName or '') for every rule."""
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [""])
    }


@pytest.mark.parametrize("name", sorted(VALUES_SETS))
def test_no_role_uses_a_wildcard(name: str) -> None:
    rendered = render(VALUES_SETS[name])
    for role in rendered.of_kind("ClusterRole") + rendered.of_kind("Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), f"{role['kind']} {role['metadata']['name']} {field}"


def test_manager_cluster_role_is_exactly_the_contract() -> None:
    grants = _grants(_rules(render(), "ClusterRole", "kuota-manager"))
    expected = {("batch", "jobs", verb, "") for verb in ("get", "list", "watch", "update", "patch")}
    for kind in (
        "clusterqueues",
        "localqueues",
        "resourceflavors",
        "cohorts",
        "workloadpriorityclasses",
        "admissionchecks",
        "provisioningrequestconfigs",
        "topologies",
    ):
        expected |= {("kueue.x-k8s.io", kind, verb, "") for verb in ("get", "list", "watch")}
    # Topology-aware scheduling: the nodes' capacity, and the gated pods sent to their domains.
    expected |= {("", "nodes", verb, "") for verb in ("list", "watch")}
    expected |= {("", "pods", verb, "") for verb in ("list", "watch", "patch")}
    # Kueue's ProvisioningRequest check controller, which kuota runs, and the CRDs it waits for.
    expected |= {("kueue.x-k8s.io", "admissionchecks/status", "patch", "")}
    expected |= {
        ("autoscaling.x-k8s.io", "provisioningrequests", verb, "") for verb in ("list", "watch", "create", "delete")
    }
    expected |= {("", "podtemplates", verb, "") for verb in ("create", "patch")}
    expected |= {("apiextensions.k8s.io", "customresourcedefinitions", verb, "") for verb in ("list", "watch")}
    with_status = sorted(
        m["spec"]["names"]["plural"]
        for m in crd_manifests()
        # an AdmissionCheck's status (its Active condition) is written by the check's own controller
        if "status" in m["spec"]["versions"][0].get("subresources", {})
        and m["spec"]["names"]["plural"] != "admissionchecks"
    )
    for kind in with_status:
        expected |= {("kueue.x-k8s.io", f"{kind}/status", verb, "") for verb in ("update", "patch")}
    expected |= {
        ("kueue.x-k8s.io", "workloads", verb, "")
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
    }
    expected |= {("kueue.x-k8s.io", "workloads/finalizers", "update", "")}
    expected |= {("kueue.x-k8s.io", "localqueues", "patch", "")}  # the ETAs' runtime history annotation
    expected |= {("", "namespaces", verb, "") for verb in ("get", "list", "watch")}
    expected |= {(group, "events", verb, "") for group in ("", "events.k8s.io") for verb in ("create", "patch")}
    # The secure /metrics endpoint's checks of its callers.
    expected |= {
        ("authentication.k8s.io", "tokenreviews", "create", ""),
        ("authorization.k8s.io", "subjectaccessreviews", "create", ""),
    }
    for kind, name in (
        ("mutatingwebhookconfigurations", "kuota-mutating-webhook"),
        ("validatingwebhookconfigurations", "kuota-validating-webhook"),
    ):
        expected |= {
            ("admissionregistration.k8s.io", kind, verb, name) for verb in ("get", "list", "watch", "update", "patch")
        }
    for crd in crd_manifests():
        expected |= {
            ("apiextensions.k8s.io", "customresourcedefinitions", verb, crd["metadata"]["name"])
            for verb in ("get", "update", "patch")
        }
    # The visibility APIServices, whose caBundle the manager keeps current.
    expected |= {
        ("apiregistration.k8s.io", "apiservices", verb, f"{version}.visibility.kueue.x-k8s.io")
        for verb in ("get", "update")
        for version in ("v1beta1", "v1beta2")
    }
    assert grants == expected


def test_manager_namespaced_role_pins_its_secret_and_lease_by_name() -> None:
    rendered = render()
    role = rendered.one("Role", "kuota-manager")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert _grants(role["rules"]) == {
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "kuota-manager"),
        ("coordination.k8s.io", "leases", "update", "kuota-manager"),
        ("coordination.k8s.io", "leases", "patch", "kuota-manager"),
        ("", "secrets", "create", ""),
        *{("", "secrets", verb, "kuota-webhook-tls") for verb in ("get", "list", "watch", "update")},
    }
    binding = rendered.one("RoleBinding", "kuota-manager")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kuota-manager", "namespace": NAMESPACE}]
    assert rendered.one("ClusterRoleBinding", "kuota-manager")["subjects"] == binding["subjects"]


def test_exporter_and_report_only_read_what_they_need() -> None:
    rendered = render(VALUES_SETS["report"])
    assert _grants(_rules(rendered, "ClusterRole", "kuota-exporter")) == {
        ("", "pods", verb, "") for verb in ("get", "list", "watch")
    }
    report_reads = (
        "workloads",
        "clusterqueues",
        "localqueues",
        "resourceflavors",
        "cohorts",
        "workloadpriorityclasses",
    )
    assert _grants(_rules(rendered, "ClusterRole", "kuota-report")) == {
        ("kueue.x-k8s.io", kind, verb, "") for kind in report_reads for verb in ("get", "list")
    } | {("", "namespaces", verb, "") for verb in ("get", "list")}
