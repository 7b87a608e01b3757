"""The chart registers Kueue's visibility API as the manager serves it: APIServices for each version, a Service
reaching only the replica that answers, the RBAC of an aggregated server, and viewer roles for users."""

from __future__ import annotations

from typing import Any

from kuota.webhook.visibility.leader_pod import SERVING_LABEL
from kuota.webhook.visibility.pending import GROUP, VERSIONS
from kuota.webhook.visibility.routes import visibility_service_name
from tests.unit.chart.rendering import NAMESPACE, VALUES_SETS, Rendered, pod_spec, render
from tests.unit.chart.test_manager import parse_with_the_cli

SERVICE = visibility_service_name("kuota-webhook")


def _args(rendered: Rendered) -> list[str]:
    args: list[str] = pod_spec(rendered.one("Deployment", "kuota-manager"))["containers"][0]["args"]
    return args


def _binding(rendered: Rendered, kind: str, name: str) -> dict[str, Any]:
    return rendered.one(kind, name)


def test_the_api_services_name_the_visibility_service_and_the_manager_keeps_their_ca() -> None:
    rendered = render()
    names = [f"{version}.{GROUP}" for version in VERSIONS]
    for name, version in zip(names, VERSIONS, strict=True):
        spec = rendered.one("APIService", name)["spec"]
        assert (spec["group"], spec["version"]) == (GROUP, version)
        assert spec["service"] == {"name": SERVICE, "namespace": NAMESPACE, "port": 443}
        assert "caBundle" not in spec and not spec.get("insecureSkipTLSVerify")
    priorities = [rendered.one("APIService", name)["spec"]["versionPriority"] for name in names]
    assert priorities == sorted(priorities, reverse=True), "the preferred version (first) must rank highest"
    parsed = parse_with_the_cli(_args(rendered))
    assert sorted(parsed.visibility_api_service) == sorted(names)
    assert parsed.visibility and parsed.visibility_serving_label
    rules = rendered.one("ClusterRole", "kuota-manager")["rules"]
    granted = [r for r in rules if r["apiGroups"] == ["apiregistration.k8s.io"]]
    assert granted == [{"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"],
                        "resourceNames": names, "verbs": ["get", "update"]}]  # fmt: skip


def test_the_visibility_service_reaches_only_the_replica_that_answers() -> None:
    rendered = render()
    webhook = rendered.one("Service", "kuota-webhook")
    service = rendered.one("Service", SERVICE)
    assert service["spec"]["selector"] == {**webhook["spec"]["selector"], SERVING_LABEL: "true"}
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"}]


def test_the_manager_gets_the_rbac_of_an_aggregated_api_server() -> None:
    rendered = render()
    subject = [{"kind": "ServiceAccount", "name": "kuota-manager", "namespace": NAMESPACE}]
    delegator = _binding(rendered, "ClusterRoleBinding", "kuota-visibility-auth-delegator")
    assert (delegator["roleRef"]["name"], delegator["subjects"]) == ("system:auth-delegator", subject)
    reader = _binding(rendered, "RoleBinding", "kuota-visibility-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert (reader["roleRef"]["kind"], reader["roleRef"]["name"]) == (
        "Role",
        "extension-apiserver-authentication-reader",
    )
    assert reader["subjects"] == subject
    label = rendered.one("Role", "kuota-visibility-serving-label")
    assert label["metadata"]["namespace"] == NAMESPACE
    assert label["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]


def test_viewer_roles_grant_get_on_each_pending_workloads_subresource() -> None:
    rendered = render()
    for scope in ("cq", "lq"):
        role = rendered.one("ClusterRole", f"kuota-pending-workloads-{scope}-viewer")
        resource = "clusterqueues" if scope == "cq" else "localqueues"
        assert role["rules"] == [
            {"apiGroups": [GROUP], "resources": [f"{resource}/pendingworkloads"], "verbs": ["get"]}
        ]
    without = render({"manager": {"visibility": {"viewerRoles": False}}})
    assert not [r for r in without.of_kind("ClusterRole") if "pending-workloads" in r["metadata"]["name"]]


def test_with_cert_manager_the_certificate_names_the_service_and_the_injector_sets_the_ca() -> None:
    rendered = render(VALUES_SETS["cert-manager"])
    certificate = rendered.one("Certificate")
    assert f"{SERVICE}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    for version in VERSIONS:
        annotations = rendered.one("APIService", f"{version}.{GROUP}")["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"
    assert parse_with_the_cli(_args(rendered)).visibility_api_service == []
    assert not [r for r in rendered.one("ClusterRole", "kuota-manager")["rules"] if "apiservices" in r["resources"]]


def test_switched_off_nothing_is_registered_and_the_manager_does_not_serve_it() -> None:
    rendered = render({"manager": {"visibility": {"enabled": False}}})
    assert "APIService" not in rendered.kinds()
    assert not [s for s in rendered.of_kind("Service") if s["metadata"]["name"] == SERVICE]
    parsed = parse_with_the_cli(_args(rendered))
    assert not parsed.visibility and not parsed.visibility_serving_label
