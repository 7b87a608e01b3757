"""A real Kubernetes control plane on loopback for kuota's integration tests and for people to poke at.

``python -m tests.cluster up --workdir DIR`` starts one and prints ``export KUBECONFIG=...``;
``python -m tests.cluster down --workdir DIR`` ends it. Tests use the ``cluster`` fixture instead.
"""

from tests.cluster.controlplane import Cluster, ClusterError
from tests.cluster.nodes import EXIT_CODE_ANNOTATION, GPU_RESOURCE, RUN_SECONDS_ANNOTATION, NodePool

__all__ = ["EXIT_CODE_ANNOTATION", "GPU_RESOURCE", "RUN_SECONDS_ANNOTATION", "Cluster", "ClusterError", "NodePool"]
