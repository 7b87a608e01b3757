"""The two controllers under test, each installed on its own fresh control plane and run as a process.

Kueue v0.17.0 runs as its release would, minus what needs a Deployment: its CRDs and webhook paths come from
its own module (the Go module cache), its webhooks are registered by URL with a caBundle we issue (with the
namespace selectors its release's kustomization adds), the CRDs its release converts by webhook are pointed at
its ``/convert`` the same way (so the API server's v1beta1 watch caches cost it what they cost kuota), and its
Configuration turns off leader election, internal certificate management and the visibility server.
Both managers authenticate as their own user in :data:`MANAGER_GROUP` so the API server counts their requests.
Both enable the same integrations (``frameworks``, Kueue's names); the CRDs of the custom kinds among them
(JobSet, KubeRay's) are installed from their Go modules first. No JobSet or KubeRay controller runs: the
controllers make Workloads from the objects alone, and pods stay gated or pending where no node fits them.
"""

from __future__ import annotations

import base64
import ctypes
import json
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from benchmarks.side_by_side.errors import ControllerError
from benchmarks.side_by_side.process_usage import MANAGER_GROUP, manager_identity_objects
from kuota.certs.authority import ServingIdentity, issue_bundle
from kuota.webhook.crds import crd_manifests
from tests.cluster import Cluster
from tests.cluster.binaries import KUEUE_VERSION, ensure_kueue, kueue_module_dir
from tests.cluster.controlplane import free_port
from tests.cluster.job_controllers import (
    appwrapper_crds,
    install_crds,
    jobset_crds,
    kuberay_crds,
    lws_crds,
    mpi_operator_crds,
    trainer_crds,
    training_operator_crds,
)
from tests.manager_process import MANAGED_LABEL, ManagerProcess
from tests.waiting import wait_until

# Kueue reads its metrics serving pair from this fixed path when internal certificate management is off.
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
KUEUE_NAMESPACE = "kueue-system"
KUOTA_NAMESPACE = "kuota-system"
# Only the webhooks for Kueue's own API, batch/v1 Jobs and (with the pod integration) Pods; the custom kinds'
# webhooks only default and validate, and Kueue makes their Workloads without them.
_KUEUE_WEBHOOK_GROUPS = frozenset({"kueue.x-k8s.io", "batch"})
POD_FRAMEWORK = "pod"
LEADERWORKERSET_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
# The pod parents mark their pod templates in their own webhooks and their pods are gated: the pod webhook too.
_POD_PARENT_WEBHOOK_GROUPS = {
    "deployment": frozenset({"", "apps"}),
    "statefulset": frozenset({"", "apps"}),
    LEADERWORKERSET_FRAMEWORK: frozenset({"", "leaderworkerset.x-k8s.io"}),
}
# The CRDs each custom kind's integration needs on the control plane.
_FRAMEWORK_CRDS: dict[str, Callable[[], list[Path]]] = {
    "jobset.x-k8s.io/jobset": jobset_crds,
    "ray.io/rayjob": kuberay_crds,
    "ray.io/raycluster": kuberay_crds,
    **{
        f"kubeflow.org/{kind}": training_operator_crds
        for kind in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")
    },
    "kubeflow.org/mpijob": mpi_operator_crds,
    "trainer.kubeflow.org/trainjob": trainer_crds,
    "workload.codeflare.dev/appwrapper": appwrapper_crds,
    LEADERWORKERSET_FRAMEWORK: lws_crds,
}
DEFAULT_FRAMEWORKS = ("batch/job",)
_READY_SECONDS = 120.0
_PR_SET_PDEATHSIG = 1


class Controller(Protocol):
    name: str
    user: str

    def install(self) -> None:
        """CRDs, the manager's namespace and identity; before any queue object is created."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    @property
    def pid(self) -> int: ...

    def namespace_labels(self) -> dict[str, str]:
        """Labels the workload namespaces need so this controller's Job webhook sees them."""


def apply_objects(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    cluster.kubectl(
        "apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )


def _install_crds(cluster: Cluster, crds: list[dict[str, Any]]) -> None:
    apply_objects(cluster, crds)
    for crd in crds:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}")


def install_framework_crds(cluster: Cluster, frameworks: tuple[str, ...]) -> None:
    """The CRDs of the custom kinds among ``frameworks``, served before a controller starts (both wait for them)."""
    paths = sorted({path for name in frameworks if name in _FRAMEWORK_CRDS for path in _FRAMEWORK_CRDS[name]()})
    if paths:
        install_crds(cluster, paths)


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _release_converted_crds(kustomization: Path) -> frozenset[str]:
    """The CRDs Kueue's release kustomization gives a conversion webhook: the names in the patches it applies
    (``patches/webhook_in_<plural>.yaml``; the release leaves some commented out)."""
    names = set()
    for patch in yaml.safe_load(kustomization.read_text()).get("patches") or []:
        document = yaml.safe_load((kustomization.parent / patch["path"]).read_text())
        if (document.get("spec") or {}).get("conversion", {}).get("strategy") == "Webhook":
            names.add(document["metadata"]["name"])
    return frozenset(names)


def _release_namespace_selectors(kustomization: Path) -> dict[str, dict[str, Any]]:
    """The namespaceSelector Kueue's release kustomization patches onto webhooks, by webhook name (the pod,
    Deployment and StatefulSet webhooks leave kube-system and Kueue's own namespace alone)."""
    selectors: dict[str, dict[str, Any]] = {}
    for patch in yaml.safe_load(kustomization.read_text()).get("patches") or []:
        for webhook in yaml.safe_load(patch.get("patch") or "{}").get("webhooks") or []:
            if "namespaceSelector" in webhook:
                selectors[webhook["name"]] = webhook["namespaceSelector"]
    return selectors


class KuotaController:
    name = "kuota"
    user = "kuota-manager"
    manager_args: tuple[str, ...] = ()

    def __init__(
        self,
        cluster: Cluster,
        frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS,
        configuration: Mapping[str, Any] | None = None,
    ) -> None:
        """``configuration``: Configuration fields beside the integrations (``waitForPodsReady``)."""
        self.cluster = cluster
        self.frameworks = frameworks
        self.configuration = dict(configuration or {})
        self._manager: ManagerProcess | None = None

    def install(self) -> None:
        _install_crds(self.cluster, crd_manifests())
        install_framework_crds(self.cluster, self.frameworks)
        apply_objects(self.cluster, manager_identity_objects(self.user))
        self.cluster.kubectl("create", "namespace", KUOTA_NAMESPACE)

    def start(self) -> None:
        config = self.cluster.workdir / "kuota-configuration.yaml"
        configuration = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "integrations": {"frameworks": list(self.frameworks)},
            **self.configuration,
        }
        config.write_text(yaml.safe_dump(configuration))
        self._manager = ManagerProcess(
            self.cluster,
            KUOTA_NAMESPACE,
            extra_args=("--log-level=WARNING", "--no-leader-elect", f"--config={config}", *self.manager_args),
            kubeconfig=self.cluster.kubeconfig_for(self.user, groups=(MANAGER_GROUP,)),
        )
        self._manager.start()

    def stop(self) -> None:
        if self._manager is not None:
            self._manager.stop()

    @property
    def pid(self) -> int:
        if self._manager is None or self._manager.process is None:
            raise ControllerError("kuota manager not started: call start() first")
        return self._manager.process.pid

    def namespace_labels(self) -> dict[str, str]:
        return {MANAGED_LABEL: "true"}


class KuotaWithoutEtasController(KuotaController):
    """kuota with its pending workloads' ETAs off (``--eta-interval=0``): what the ETAs cost, beside the default."""

    name = "kuota-no-etas"
    manager_args = ("--eta-interval=0",)


class KueueController:
    name = "Kueue"
    user = "kueue-manager"

    def __init__(
        self,
        cluster: Cluster,
        frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS,
        configuration: Mapping[str, Any] | None = None,
    ) -> None:
        """``frameworks``: Kueue's enabled integrations (their CRDs are installed by :meth:`install`);
        ``configuration``: Configuration fields beside them (``waitForPodsReady``)."""
        self.cluster = cluster
        self.frameworks = frameworks
        self.configuration = dict(configuration or {})
        self.binary = ensure_kueue()
        self.module = kueue_module_dir()
        self.folder = cluster.workdir / "kueue"
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.log_path = cluster.workdir / "kueue-manager.log"
        self._process: subprocess.Popen[bytes] | None = None

    def install(self) -> None:
        folder = self.module / "config" / "components" / "crd"
        crds = [yaml.safe_load(path.read_text()) for path in sorted((folder / "bases").glob("*.yaml"))]
        if not crds:
            raise ControllerError(f"no CRDs under {folder / 'bases'}: is Kueue {KUEUE_VERSION} in the module cache?")
        ca_bundle = self._write_certificates()
        converted = _release_converted_crds(folder / "kustomization.yaml")
        for crd in crds:
            if crd["metadata"]["name"] in converted:
                crd["spec"]["conversion"] = self._conversion(ca_bundle)
        _install_crds(self.cluster, crds)
        install_framework_crds(self.cluster, self.frameworks)
        apply_objects(self.cluster, manager_identity_objects(self.user))
        self.cluster.kubectl("create", "namespace", KUEUE_NAMESPACE)
        apply_objects(self.cluster, self._webhook_configurations(ca_bundle))

    def _conversion(self, ca_bundle: bytes) -> dict[str, Any]:
        """The release's conversion stanza (``patches/webhook_in_*.yaml``), by URL instead of by Service."""
        return {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "url": f"https://127.0.0.1:{self.webhook_port}/convert",
                    "caBundle": base64.b64encode(ca_bundle).decode(),
                },
                "conversionReviewVersions": ["v1"],
            },
        }

    def _write_certificates(self) -> bytes:
        bundle = issue_bundle(ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)), datetime.now(UTC))
        for folder in (self.folder / "webhook-certs", KUEUE_METRICS_CERT_DIR):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "tls.crt").write_bytes(bundle.cert_pem)
                (folder / "tls.key").write_bytes(bundle.key_pem)
            except OSError as error:
                raise ControllerError(
                    f"cannot write Kueue's serving certificate to {folder}: {error}; Kueue reads its metrics "
                    f"certificate from {KUEUE_METRICS_CERT_DIR} when internalCertManagement is off, so run the "
                    "benchmark as a user who may write there"
                ) from error
        return bundle.ca_cert_pem

    def _webhook_configurations(self, ca_bundle: bytes) -> list[dict[str, Any]]:
        folder = self.module / "config" / "components" / "webhook"
        selectors = _release_namespace_selectors(folder / "kustomization.yaml")
        wanted = _KUEUE_WEBHOOK_GROUPS | ({""} if POD_FRAMEWORK in self.frameworks else set())
        for framework in self.frameworks:
            wanted |= _POD_PARENT_WEBHOOK_GROUPS.get(framework, frozenset())
        configurations = []
        for document in yaml.safe_load_all((folder / "manifests.yaml").read_text()):
            if not document:
                continue
            webhooks = []
            for webhook in document["webhooks"]:
                groups = {group for rule in webhook["rules"] for group in rule["apiGroups"]}
                if not groups & wanted:
                    continue
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{path}",
                    "caBundle": base64.b64encode(ca_bundle).decode(),
                }
                if webhook["name"] in selectors:
                    webhook["namespaceSelector"] = selectors[webhook["name"]]
                webhooks.append(webhook)
            document["metadata"]["name"] = f"kueue-{document['metadata']['name']}"
            document["webhooks"] = webhooks
            configurations.append(document)
        return configurations

    def _configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.folder / "webhook-certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            # Kueue's shipped client limits (config/components/manager), as its harness runs it.
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": list(self.frameworks)},
            "featureGates": {"VisibilityOnDemand": False},
            **self.configuration,
        }

    def start(self) -> None:
        config_path = self.folder / "configuration.yaml"
        config_path.write_text(yaml.safe_dump(self._configuration()))
        kubeconfig = self.cluster.kubeconfig_for(self.user, groups=(MANAGER_GROUP,))
        command = [
            str(self.binary),
            f"--config={config_path}",
            f"--kubeconfig={kubeconfig}",
            f"--visibility-server-port={free_port()}",
            "--zap-log-level=error",
        ]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.folder,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
            )
        wait_until(self._ready, f"Kueue to be ready (log: {self.log_path})", timeout=_READY_SECONDS)

    def _ready(self) -> bool:
        if self._process is None or self._process.poll() is not None:
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
            raise ControllerError(f"Kueue exited; see {self.log_path}:\n{tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=30)

    @property
    def pid(self) -> int:
        if self._process is None:
            raise ControllerError("Kueue not started: call start() first")
        return self._process.pid

    def namespace_labels(self) -> dict[str, str]:
        return {}
