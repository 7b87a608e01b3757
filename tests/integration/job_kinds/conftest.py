"""The upstream job controllers (JobSet, KubeRay, the training-operator, the mpi-operator, Trainer v2), started
once per test session and only for the tests that use them, and a ``kuota manager`` with their integrations
enabled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster
from tests.cluster.job_controllers import (
    UpstreamController,
    appwrapper_crds,
    install_crds,
    jobset_crds,
    kuberay_crds,
    lws_crds,
    mpi_operator_crds,
    start_appwrapper,
    start_jobset,
    start_kuberay,
    start_mpi_operator,
    start_trainer,
    start_training_operator,
    trainer_crds,
    training_operator_crds,
)
from tests.integration.job_kinds.queueing import FRAMEWORKS, clean_slate, ensure_managed_namespace
from tests.manager_process import ManagerProcess

KUOTA_NAMESPACE = "kuota-system"


@pytest.fixture(scope="session")
def upstream_crds(cluster: Cluster) -> list[str]:
    """The CRDs of JobSet, KubeRay, the training-operator, the mpi-operator, Trainer v2, AppWrapper and
    LeaderWorkerSet, from their Go modules, on the session's cluster."""
    crds = [*jobset_crds(), *kuberay_crds(), *training_operator_crds(), *mpi_operator_crds(), *trainer_crds()]
    crds += [*appwrapper_crds(), *lws_crds()]
    return install_crds(cluster, crds)


def _controller(cluster: Cluster, start: Callable[[Cluster], UpstreamController]) -> Iterator[UpstreamController]:
    controller = start(cluster)
    try:
        yield controller
    finally:
        cluster.end(controller.name)


@pytest.fixture(scope="session")
def jobset_controller(cluster: Cluster, upstream_crds: list[str]) -> Iterator[UpstreamController]:
    del upstream_crds
    yield from _controller(cluster, start_jobset)


@pytest.fixture(scope="session")
def kuberay_operator(cluster: Cluster, upstream_crds: list[str]) -> Iterator[UpstreamController]:
    del upstream_crds
    yield from _controller(cluster, start_kuberay)


@pytest.fixture(scope="session")
def training_operator(cluster: Cluster, upstream_crds: list[str]) -> Iterator[UpstreamController]:
    del upstream_crds
    yield from _controller(cluster, start_training_operator)


@pytest.fixture(scope="session")
def mpi_operator(cluster: Cluster, upstream_crds: list[str]) -> Iterator[UpstreamController]:
    del upstream_crds
    yield from _controller(cluster, start_mpi_operator)


@pytest.fixture(scope="session")
def trainer(cluster: Cluster, jobset_controller: UpstreamController) -> Iterator[UpstreamController]:
    """Trainer v2's controller, with the JobSet controller its TrainJobs run under."""
    del jobset_controller
    yield from _controller(cluster, start_trainer)


@pytest.fixture(scope="session")
def appwrapper_controller(cluster: Cluster, upstream_crds: list[str]) -> Iterator[UpstreamController]:
    del upstream_crds
    yield from _controller(cluster, start_appwrapper)


@pytest.fixture(scope="module")
def kinds_manager(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], upstream_crds: list[str]
) -> Iterator[ManagerProcess]:
    """kuota's manager with every upstream kind's integration enabled (a Kueue Configuration file), started
    once the kinds are served."""
    del kuota_crds, upstream_crds
    cluster.kubectl("create", "namespace", KUOTA_NAMESPACE, check=False)
    config = cluster.workdir / "kinds-manager-config.yaml"
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    config.write_text(yaml.safe_dump(configuration))
    running = ManagerProcess(cluster, KUOTA_NAMESPACE, identity="kinds-manager", extra_args=(f"--config={config}",))
    running.start()
    try:
        yield running
    finally:
        running.stop()
        running.unregister()


@pytest.fixture
def team(cluster: Cluster, kinds_manager: ManagerProcess) -> Iterator[str]:
    """A fresh managed namespace with a LocalQueue ``team-queue``; every job kind and queue object gone after."""
    name = ensure_managed_namespace(cluster)
    try:
        yield name
    finally:
        clean_slate(cluster, kinds_manager, name)
