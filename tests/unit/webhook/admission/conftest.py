"""An admission app with in-memory cluster facts, served over plain HTTP by aiohttp's test server."""

from __future__ import annotations

from typing import Any

from kuota.engine.model import LabelSelector
from kuota.webhook.admission.endpoints import kuota_rules
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity
from kuota.webhook.admission.server import AdmissionRoutes, ReadinessCheck, build_app
from tests.unit.webhook.admission.static_facts import StaticClusterFacts

KUOTA_USER = "system:serviceaccount:kuota-system:kuota-manager"
POLICY = JobPolicy(
    manage_jobs_without_queue_name=False,
    managed_jobs_namespace_selector=LabelSelector(),
    kuota=KuotaIdentity(usernames=frozenset({KUOTA_USER})),
)


def review(request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def job_request(obj: dict[str, Any], uid: str = "uid-1", operation: str = "CREATE") -> dict[str, Any]:
    return review(
        {
            "uid": uid,
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "operation": operation,
            "namespace": "research",
            "name": "train",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj,
        }
    )


def make_app(facts: StaticClusterFacts | None = None, readiness: tuple[ReadinessCheck, ...] = (), **extra: Any) -> Any:
    rules = kuota_rules(POLICY, facts or StaticClusterFacts())
    rules.update(extra)
    return build_app(AdmissionRoutes(rules=rules, readiness=readiness, max_body_bytes=64 * 1024))
