"""kuota's webhook paths and the rule behind each, and the webhook configurations that register them.

The same :func:`webhook_configurations` output serves an in-cluster install (``service``) and an
out-of-cluster run registered by URL (tests, local development).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from kuota.webhook.admission.cluster_facts import ClusterFacts
from kuota.webhook.admission.job_policy import JobPolicy, default_job, validate_job
from kuota.webhook.admission.kueue_validation import KUEUE_OBJECT_KINDS, review_kueue_object
from kuota.webhook.admission.server import Rule

MUTATE_JOB_PATH = "/mutate-batch-v1-job"
VALIDATE_JOB_PATH = "/validate-batch-v1-job"
MUTATING_CONFIGURATION = "kuota-mutating-webhook"
VALIDATING_CONFIGURATION = "kuota-validating-webhook"


def kuota_rules(policy: JobPolicy, facts: ClusterFacts) -> dict[str, Rule]:
    rules: dict[str, Rule] = {
        MUTATE_JOB_PATH: partial(default_job, policy=policy, facts=facts),
        VALIDATE_JOB_PATH: partial(validate_job, policy=policy, facts=facts),
    }
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
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration for every kuota endpoint.

    ``namespace_selector`` narrows the Job webhooks (e.g. to one test namespace); the queueing objects are
    cluster-scoped or kuota's own and are always reviewed.
    """
    common: dict[str, Any] = {
        "endpoint": endpoint,
        "ca_bundle_pem": ca_bundle_pem,
        "failure_policy": failure_policy,
    }
    job_rule = {
        "apiGroups": ["batch"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["jobs"],
        "scope": "Namespaced",
    }
    mutating_job = _webhook("mjob.kuota.dev", MUTATE_JOB_PATH, **common, rule=job_rule)
    mutating_job["rules"] = [{**job_rule, "operations": ["CREATE"]}]
    mutating_job["reinvocationPolicy"] = "Never"
    validating = [_webhook("vjob.kuota.dev", VALIDATE_JOB_PATH, **common, rule=job_rule)]
    if namespace_selector is not None:
        mutating_job["namespaceSelector"] = namespace_selector
        validating[0]["namespaceSelector"] = namespace_selector
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
        "webhooks": [mutating_job],
    }
    validating_configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING_CONFIGURATION},
        "webhooks": validating,
    }
    return mutating, validating_configuration
