"""kuota's webhook paths and the rule behind each, and the webhook configurations that register them.

Both follow the enabled integrations (``JobPolicy.integrations``, from the Configuration's
``integrations.frameworks``): a mutating and a validating webhook per managed kind and pod parent (whose mutating
one also reviews UPDATE, as Kueue's: a queue label set later reaches the pod template), the Pod webhooks when
``pod`` or a pod parent is enabled, and the catch-all warning for labelled objects of unmanaged kinds
(:mod:`unmanaged`). The same :func:`webhook_configurations` output serves an in-cluster install (``service``)
and an out-of-cluster run registered by URL (tests, local development); the chart renders the same
(tests/unit/chart).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from kuota.webhook.admission.cluster_facts import ClusterFacts
from kuota.webhook.admission.job_policy import JobPolicy, default_job, mutate_path, validate_job, validate_path
from kuota.webhook.admission.kueue_validation import KUEUE_OBJECT_KINDS, review_kueue_object
from kuota.webhook.admission.pod_parent_policy import default_parent, validate_parent
from kuota.webhook.admission.pod_policy import MUTATE_POD_PATH, VALIDATE_POD_PATH, default_pod, validate_pod
from kuota.webhook.admission.server import Rule
from kuota.webhook.admission.unmanaged import WARN_UNMANAGED_PATH, warn_unmanaged
from kuota.webhook.jobs.adapter import QUEUE_LABEL, JobAdapter
from kuota.webhook.jobs.pod_parents import PodParent
from kuota.webhook.jobs.registry import DEFAULT_REGISTRY, Registry

MUTATE_JOB_PATH = "/mutate-batch-v1-job"
VALIDATE_JOB_PATH = "/validate-batch-v1-job"
MUTATING_CONFIGURATION = "kuota-mutating-webhook"
VALIDATING_CONFIGURATION = "kuota-validating-webhook"


def kuota_rules(policy: JobPolicy, facts: ClusterFacts) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for adapter in policy.integrations.adapters:
        rules[mutate_path(adapter)] = partial(default_job, policy=policy, facts=facts, adapter=adapter)
        rules[validate_path(adapter)] = partial(validate_job, policy=policy, facts=facts, adapter=adapter)
    for parent in policy.integrations.pod_parents:
        rules[mutate_path(parent)] = partial(default_parent, policy=policy, facts=facts, parent=parent)
        rules[validate_path(parent)] = partial(validate_parent, policy=policy, facts=facts, parent=parent)
    if policy.integrations.gates_pods:
        rules[MUTATE_POD_PATH] = partial(default_pod, policy=policy, facts=facts)
        rules[VALIDATE_POD_PATH] = partial(validate_pod, policy=policy, facts=facts)
    rules[WARN_UNMANAGED_PATH] = partial(warn_unmanaged, policy=policy)
    for target in KUEUE_OBJECT_KINDS:
        rules[target.path] = partial(review_kueue_object, target, kuota=policy.kuota)
    return rules


@dataclass(frozen=True)
class WebhookEndpoint:
    """Where the API server reaches the webhook: a URL (out of cluster) or a Service (in cluster)."""

    url: str | None = None
    service_name: str | None = None
    service_namespace: str | None = None
    service_port: int = 443

    def client_config(self, path: str, ca_bundle_pem: bytes) -> dict[str, Any]:
        config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle_pem).decode()}
        if self.url is not None:
            config["url"] = self.url.rstrip("/") + path
        else:
            config["service"] = {
                "name": self.service_name,
                "namespace": self.service_namespace,
                "path": path,
                "port": self.service_port,
            }
        return config


def _webhook(
    name: str,
    path: str,
    *,
    endpoint: WebhookEndpoint,
    ca_bundle_pem: bytes,
    rule: dict[str, Any],
    failure_policy: Literal["Fail", "Ignore"],
) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": failure_policy,
        "timeoutSeconds": 10,
        "clientConfig": endpoint.client_config(path, ca_bundle_pem),
        "rules": [rule],
    }


def webhook_configurations(
    endpoint: WebhookEndpoint,
    ca_bundle_pem: bytes,
    failure_policy: Literal["Fail", "Ignore"] = "Fail",
    namespace_selector: dict[str, Any] | None = None,
    integrations: Registry = DEFAULT_REGISTRY,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration for every kuota endpoint.

    ``namespace_selector`` narrows the webhooks of managed kinds and the warning (e.g. to one test namespace);
    the queueing objects are cluster-scoped or kuota's own and are always reviewed.
    """
    common: dict[str, Any] = {
        "endpoint": endpoint,
        "ca_bundle_pem": ca_bundle_pem,
        "failure_policy": failure_policy,
    }
    create = ["CREATE"]
    kinds_reviewed: list[JobAdapter | PodParent] = sorted(
        [*integrations.adapters, *integrations.pod_parents], key=lambda kind: kind.framework
    )
    kinds = [
        (
            kind.kind.kind.lower(),
            kind.kind.group,
            kind.kind.version,
            kind.plural,
            mutate_path(kind),
            validate_path(kind),
            ["CREATE", "UPDATE"] if isinstance(kind, PodParent) else create,
        )
        for kind in kinds_reviewed
    ]
    if integrations.gates_pods:
        kinds.append(("pod", "", "v1", "pods", MUTATE_POD_PATH, VALIDATE_POD_PATH, create))
    mutating_webhooks: list[dict[str, Any]] = []
    validating: list[dict[str, Any]] = []
    for lower, group, version, plural, mutate, validate, mutated_on in kinds:
        rule = {
            "apiGroups": [group],
            "apiVersions": [version],
            "operations": ["CREATE", "UPDATE"],
            "resources": [plural],
            "scope": "Namespaced",
        }
        mutating = _webhook(f"m{lower}.kuota.dev", mutate, **common, rule={**rule, "operations": mutated_on})
        mutating["reinvocationPolicy"] = "Never"
        mutating_webhooks.append(mutating)
        validating.append(_webhook(f"v{lower}.kuota.dev", validate, **common, rule=rule))
    everything = {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["*"], "scope": "*"}
    warning = _webhook(
        "wunmanaged.kuota.dev", WARN_UNMANAGED_PATH, **{**common, "failure_policy": "Ignore"}, rule=everything
    )
    warning["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
    validating.append(warning)
    if namespace_selector is not None:
        for webhook in [*mutating_webhooks, *validating]:
            webhook["namespaceSelector"] = namespace_selector
    for target in KUEUE_OBJECT_KINDS:
        plural = target.kind.kind.lower() + "s"
        rule = {
            "apiGroups": [target.kind.group],
            "apiVersions": [target.kind.version],
            "operations": ["CREATE", "UPDATE"],
            "resources": [plural],
            "scope": "*",
        }
        name = f"v{target.kind.kind.lower()}.kuota.dev"
        validating.append(_webhook(name, target.path, **common, rule=rule))
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING_CONFIGURATION},
        "webhooks": mutating_webhooks,
    }
    validating_configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING_CONFIGURATION},
        "webhooks": validating,
    }
    return mutating, validating_configuration
