"""The chart installed with more integrations enabled: its webhooks cover the enabled kinds and its RBAC grants
the manager what they need and nothing for the kinds left out (checked by impersonation, ``kubectl auth can-i``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster
from tests.integration.chart.conftest import _minimal_crd, as_list, install, uninstall
from tests.unit.chart.rendering import NAMESPACE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

MANAGER = f"system:serviceaccount:{NAMESPACE}:kuota-manager"
FRAMEWORKS = ["batch/job", "pod", "jobset.x-k8s.io/jobset", "ray.io/rayjob"]


# kubectl auth can-i resolves a resource through discovery: the kinds asked about must be served. Minimal CRDs
# stand in where the upstream ones are not installed (created here, removed here).
ASKED_KINDS = (
    ("jobset.x-k8s.io", "JobSet", "jobsets"),
    ("ray.io", "RayJob", "rayjobs"),
    ("ray.io", "RayCluster", "rayclusters"),
    ("kubeflow.org", "PyTorchJob", "pytorchjobs"),
)


@pytest.fixture(scope="module")
def served_kinds(cluster: Cluster) -> Iterator[None]:
    missing = [
        _minimal_crd(*kind)
        for kind in ASKED_KINDS
        if cluster.kubectl("get", "crd", f"{kind[2]}.{kind[0]}", check=False).returncode != 0
    ]
    if missing:
        cluster.kubectl("apply", "-f", "-", input=as_list(missing))
    for manifest in missing:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{manifest['metadata']['name']}")
    for group, _, plural in ASKED_KINDS:
        wait_until(
            lambda resource=f"{plural}.{group}": cluster.kubectl("get", resource, "-A", check=False).returncode == 0,
            f"discovery of {plural}.{group}",
        )
    yield
    for manifest in missing:
        cluster.kubectl("delete", "crd", manifest["metadata"]["name"], "--timeout=60s", check=False)


@pytest.fixture(scope="module")
def release(cluster: Cluster, served_kinds: None) -> Iterator[str]:
    del served_kinds
    output = install(cluster, {"managerConfig": {"integrations": {"frameworks": FRAMEWORKS}}})
    try:
        yield output
    finally:
        uninstall(cluster)  # at once: with no manager behind it, its Pod webhook refuses every labelled pod


def _can(cluster: Cluster, verb: str, resource: str) -> bool:
    result = cluster.kubectl("auth", "can-i", verb, resource, f"--as={MANAGER}", "--all-namespaces", check=False)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result.stderr
    return answer == "yes"


NEEDED = [
    ("patch", "pods"),  # ungating, and the finalizer released
    ("delete", "pods"),  # eviction stops a pod by deleting it
    ("watch", "pods"),
    ("patch", "jobsets.jobset.x-k8s.io"),
    ("watch", "rayjobs.ray.io"),
    ("update", "jobs.batch"),
    ("watch", "customresourcedefinitions.apiextensions.k8s.io"),  # a kind's CRD installed later is picked up
]
NOT_NEEDED = [
    ("create", "pods"),
    ("delete", "jobsets.jobset.x-k8s.io"),
    ("patch", "pytorchjobs.kubeflow.org"),  # not enabled
    ("get", "rayclusters.ray.io"),  # not enabled
    ("delete", "customresourcedefinitions.apiextensions.k8s.io"),
]


@pytest.mark.parametrize(("verb", "resource"), NEEDED, ids=[" ".join(p) for p in NEEDED])
def test_the_manager_may_do_what_the_enabled_integrations_need(
    cluster: Cluster, release: str, verb: str, resource: str
) -> None:
    del release
    assert _can(cluster, verb, resource)


@pytest.mark.parametrize(("verb", "resource"), NOT_NEEDED, ids=[" ".join(p) for p in NOT_NEEDED])
def test_the_manager_may_not_do_what_no_enabled_integration_needs(
    cluster: Cluster, release: str, verb: str, resource: str
) -> None:
    del release
    assert not _can(cluster, verb, resource)


def test_the_webhooks_cover_the_enabled_kinds_and_warn_about_the_rest(cluster: Cluster, release: str) -> None:
    del release
    mutating = json.loads(
        cluster.kubectl("get", "mutatingwebhookconfiguration", "kuota-mutating-webhook", "-o", "json").stdout
    )
    assert sorted(hook["name"] for hook in mutating["webhooks"]) == [
        "mjob.kuota.dev", "mjobset.kuota.dev", "mpod.kuota.dev", "mrayjob.kuota.dev",
    ]  # fmt: skip
    validating = json.loads(
        cluster.kubectl("get", "validatingwebhookconfiguration", "kuota-validating-webhook", "-o", "json").stdout
    )
    warning = next(hook for hook in validating["webhooks"] if hook["name"] == "wunmanaged.kuota.dev")
    assert warning["failurePolicy"] == "Ignore"
