"""``kuota manager`` as a real process against the test control plane, registered by URL.

A real process, so tests can SIGKILL it mid-write and start it again as a restarted Pod would be. Its Job
webhooks only see namespaces labelled ``kuota.test/managed=true``, so other tests' Jobs never depend on it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kuota.webhook.crds import crd_manifests
from kuota.webhook.crds.versions import DEFAULT_CONVERSION_SERVICE, conversion
from tests.cluster import Cluster
from tests.cluster.controlplane import free_port
from tests.waiting import wait_until

MANAGED_LABEL = "kuota.test/managed"
REPO_ROOT = Path(__file__).resolve().parents[1]


class ManagerProcess:
    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        identity: str = "manager-0",
        extra_args: tuple[str, ...] = (),
        kubeconfig: Path | None = None,
        *,
        secure_metrics: bool = False,
        webhook_host: str = "127.0.0.1",
    ) -> None:
        """``secure_metrics`` leaves /metrics as the manager defaults it (HTTPS, callers checked); tests about
        something else read it over plain HTTP. ``webhook_host`` is where the TLS server listens (the API server
        reaches the webhook at 127.0.0.1; an aggregated API's endpoint cannot be a loopback address)."""
        self.webhook_host = webhook_host
        self.cluster = cluster
        self.secure_metrics = secure_metrics
        self.namespace = namespace
        self.identity = identity
        self.extra_args = extra_args
        self.kubeconfig = kubeconfig or cluster.kubeconfig_for("kuota-manager")
        self.webhook_port = free_port()
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.log_path = cluster.workdir / f"manager-{identity}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, wait_ready: bool = True) -> None:
        webhook = f"127.0.0.1:{self.webhook_port}"
        command = [
            sys.executable, "-m", "kuota", "manager",
            f"--kubeconfig={self.kubeconfig}",
            f"--namespace={self.namespace}",
            f"--identity={self.identity}",
            f"--webhook-listen={self.webhook_host}:{self.webhook_port}",
            f"--metrics-listen=127.0.0.1:{self.metrics_port}",
            f"--health-listen=127.0.0.1:{self.health_port}",
            f"--webhook-url=https://{webhook}",
            "--webhook-ip=127.0.0.1",
            f'--job-namespace-selector={{"matchLabels": {{"{MANAGED_LABEL}": "true"}}}}',
            "--lease-duration=4",
            *(() if self.secure_metrics else ("--no-metrics-secure",)),
            *self.extra_args,
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1"),
            )  # fmt: skip
        self.starts += 1
        if wait_ready:
            wait_until(self.ready, f"manager {self.identity} to be ready (log: {self.log_path})", timeout=60)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ensure_started(self) -> None:
        """Start it again if a test stopped or killed it (cleanup needs a manager to release finalizers)."""
        if not self.running():
            self.start()

    def ready(self) -> bool:
        if not self.running():
            raise AssertionError(f"manager {self.identity} exited; see {self.log_path}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as reply:
            return str(reply.read().decode())

    def metric_values(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of /metrics, keyed by name and sorted labels."""
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(self.metrics())
            for sample in family.samples
        }

    def kill(self) -> None:
        """SIGKILL: no cleanup, no Lease release, writes cut off wherever they are."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM: the graceful path (controller stops, Lease released)."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process is not None else 0
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def unregister(self) -> None:
        """Remove the webhook configurations so a stopped manager blocks nothing, and point the CRDs' conversion
        back at the generated Service."""
        self.cluster.kubectl("delete", "mutatingwebhookconfiguration", "kuota-mutating-webhook", "--ignore-not-found")
        self.cluster.kubectl(
            "delete", "validatingwebhookconfiguration", "kuota-validating-webhook", "--ignore-not-found"
        )
        restore_crd_conversion(self.cluster)


def restore_crd_conversion(cluster: Cluster) -> None:
    """Point the installed kuota CRDs' conversion webhook back at the generated Service, as a manager registered
    by URL leaves it at its URL: applied over a URL, the chart's Service would make the clientConfig invalid."""
    client_config = {"url": None, "caBundle": None, "service": DEFAULT_CONVERSION_SERVICE}
    patch = json.dumps({"spec": {"conversion": conversion(client_config)}})
    for manifest in crd_manifests():
        name = manifest["metadata"]["name"]
        if cluster.kubectl("get", "crd", name, check=False).returncode == 0:
            cluster.kubectl("patch", "crd", name, "--type=merge", "-p", patch)
