"""The integration tier: one real control plane for the whole test session, a fresh namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("control-plane")
    started = Cluster.start(workdir)
    print(f"\ncontrol plane ready in {started.startup_seconds:.1f}s at {started.server} (logs: {workdir})")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
