"""The manager's --config as Kueue's Configuration: integrations.frameworks, read as Kueue names them, the webhooks and
RBAC rules they give, and what the controller does not enforce, said at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kuota.webhook.admission.endpoints import WebhookEndpoint, webhook_configurations
from kuota.webhook.jobs.registry import ADAPTERS, DEFAULT_REGISTRY, select
from kuota.webhook.manager import ManagerError, load_configuration

ALL = [adapter.framework for adapter in ADAPTERS] + ["pod"]


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n" + body)
    return path


def test_without_integrations_only_batch_jobs_are_managed_as_in_kueue(tmp_path: Path) -> None:
    assert load_configuration(None, "kuota-system")[1] == DEFAULT_REGISTRY
    assert load_configuration(_config(tmp_path, "manageJobsWithoutQueueName: false\n"), "x")[1].frameworks == (
        "batch/job",
    )


def test_the_named_frameworks_are_enabled_and_kueues_others_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _config(tmp_path, "integrations:\n  frameworks: [pod, batch/job, sparkoperator.k8s.io/sparkapplication]\n")
    with caplog.at_level(logging.WARNING):
        registry = load_configuration(path, "kuota-system")[1]
    assert registry.frameworks == ("batch/job", "pod")
    assert registry.pods
    assert "sparkoperator.k8s.io/sparkapplication is a Kueue integration kuota does not implement" in caplog.text


@pytest.mark.parametrize(
    ("body", "timeout"),
    [
        ("waitForPodsReady:\n  timeout: 5m\n", 300),
        ("fairSharing: {}\n", 1800),  # on by default, as in Kueue v0.19+
        ("featureGates:\n  DisableWaitForPodsReady: true\n", None),
        ("featureGates:\n  DisableWaitForPodsReady: true\nwaitForPodsReady:\n  timeout: 5m\n", None),
        ("waitForPodsReady:\n  enable: false\n", None),
    ],
)
def test_wait_for_pods_ready_is_on_unless_kueues_feature_gate_turns_it_off(
    tmp_path: Path, body: str, timeout: int | None
) -> None:
    wait = load_configuration(_config(tmp_path, body), "kuota-system")[0].wait_for_pods_ready
    assert (wait.timeout_seconds if wait is not None else None) == timeout
    assert load_configuration(None, "kuota-system")[0].wait_for_pods_ready is not None


@pytest.mark.parametrize(
    ("frameworks", "message"),
    [
        ("[batch/jobs]", "names 'batch/jobs', which no integration has; kuota implements"),
        ("batch/job", "must be a list of names"),
    ],
)
def test_an_unusable_frameworks_list_is_one_line_naming_it(tmp_path: Path, frameworks: str, message: str) -> None:
    path = _config(tmp_path, f"integrations:\n  frameworks: {frameworks}\n")
    with pytest.raises(ManagerError, match=message):
        load_configuration(path, "kuota-system")


def test_every_enabled_kind_gets_a_mutating_and_a_validating_webhook_and_labelled_objects_a_warning() -> None:
    mutating, validating = webhook_configurations(
        WebhookEndpoint(url="https://127.0.0.1:9443"), b"ca", integrations=select(ALL).registry
    )
    names = {webhook["name"] for webhook in mutating["webhooks"]}
    assert {"mjob.kuota.dev", "mpod.kuota.dev"} <= names
    assert len(names) == len(ALL)
    pod_webhook = next(w for w in mutating["webhooks"] if w["name"] == "mpod.kuota.dev")
    assert pod_webhook["clientConfig"]["url"].endswith("/mutate--v1-pod")
    assert pod_webhook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    warning = next(w for w in validating["webhooks"] if w["name"] == "wunmanaged.kuota.dev")
    assert warning["failurePolicy"] == "Ignore"
    assert warning["objectSelector"] == {
        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    }
