"""The upstream controllers of the job kinds kuota admits (JobSet, KubeRay, Kubeflow's training-operator and
mpi-operator, Trainer v2, AppWrapper, LeaderWorkerSet), run as processes against a test control plane, with their
CRDs from the Go module cache.

Each runs as its Deployment would, but out of cluster: a kubeconfig of its own, leader election off, metrics off,
its health probe on a free loopback port (ready once ``/readyz`` answers). Their admission webhooks are not
registered (the API server never calls them), so a test writes complete specs where a webhook would default; but
LeaderWorkerSet's are: its pod webhook writes the group and worker indices its controller relies on.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.cluster.binaries import (
    APPWRAPPER_MODULE,
    APPWRAPPER_VERSION,
    JOBSET_MODULE,
    JOBSET_VERSION,
    KUBERAY_MODULE,
    KUBERAY_VERSION,
    LWS_MODULE,
    LWS_VERSION,
    MPI_OPERATOR_MODULE,
    MPI_OPERATOR_VERSION,
    TRAINER_MODULE,
    TRAINER_VERSION,
    TRAINING_OPERATOR_MODULE,
    TRAINING_OPERATOR_VERSION,
    ensure_appwrapper,
    ensure_jobset,
    ensure_kuberay,
    ensure_lws,
    ensure_mpi_operator,
    ensure_trainer,
    ensure_training_operator,
    module_dir,
)
from tests.cluster.controlplane import Cluster, free_port
from tests.waiting import wait_until

_READY_SECONDS = 120.0
TRAINING_OPERATOR_SECRET = "training-operator-webhook-cert"
# controller-runtime's default webhook certificate folder, which the training-operator's rotator waits on for its
# Secret's volume and the trainer and AppWrapper serve from; none lets one change it (as Kueue's metrics path is
# fixed in benchmarks/side_by_side/controllers.py).
CONTROLLER_RUNTIME_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")


def jobset_crds() -> list[Path]:
    return [module_dir(JOBSET_MODULE, JOBSET_VERSION) / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"]


def lws_crds() -> list[Path]:
    return [module_dir(LWS_MODULE, LWS_VERSION) / "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"]


def kuberay_crds() -> list[Path]:
    bases = module_dir(KUBERAY_MODULE, KUBERAY_VERSION) / "config/crd/bases"
    return sorted(bases.glob("ray.io_*.yaml"))  # the operator watches all four kinds


# The training-operator's kinds Kueue integrates with (its own MPIJob v1 is not: Kueue's is mpi-operator's v2beta1).
TRAINING_OPERATOR_KINDS = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")


def training_operator_crds() -> list[Path]:
    bases = module_dir(TRAINING_OPERATOR_MODULE, TRAINING_OPERATOR_VERSION) / "manifests/base/crds"
    return [bases / f"kubeflow.org_{kind}s.yaml" for kind in TRAINING_OPERATOR_KINDS]


def mpi_operator_crds() -> list[Path]:
    return [module_dir(MPI_OPERATOR_MODULE, MPI_OPERATOR_VERSION) / "manifests/base/kubeflow.org_mpijobs.yaml"]


def trainer_crds() -> list[Path]:
    bases = module_dir(TRAINER_MODULE, TRAINER_VERSION) / "manifests/base/crds"
    return sorted(bases.glob("trainer.kubeflow.org_*.yaml"))


def appwrapper_crds() -> list[Path]:
    bases = module_dir(APPWRAPPER_MODULE, APPWRAPPER_VERSION) / "config/crd/bases"
    return [bases / "workload.codeflare.dev_appwrappers.yaml"]


def install_crds(cluster: Cluster, paths: list[Path]) -> list[str]:
    """Apply CRDs (server-side: KubeRay's are too large for the last-applied annotation) and wait until each is
    Established and served; their names."""
    documents = [document for path in paths for document in yaml.safe_load_all(path.read_text()) if document]
    listing = {"apiVersion": "v1", "kind": "List", "items": documents}
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(listing))
    names = [str(document["metadata"]["name"]) for document in documents]
    for name in names:  # not kubectl wait: it fails, not waits, on a CRD whose status has no conditions yet
        wait_until(functools.partial(_established, cluster, name), f"CRD {name} Established")
    for name in names:  # discovery lags Established by a moment; a CRD's name is its plural.group
        wait_until(functools.partial(_served, cluster, name), f"{name} served")
    return names


def _established(cluster: Cluster, name: str) -> bool:
    crd = json.loads(cluster.kubectl("get", "crd", name, "-o", "json").stdout)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _served(cluster: Cluster, resource: str) -> bool:
    return cluster.kubectl("get", resource, "-A", check=False).returncode == 0


@dataclass(frozen=True)
class UpstreamController:
    """One controller process of the cluster (see :meth:`Cluster.spawn`), ready when ``health_url`` answers."""

    name: str
    version: str
    health_url: str

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.health_url, timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def _readyz(health_port: int) -> str:
    return f"http://127.0.0.1:{health_port}/readyz"


def _await_ready(cluster: Cluster, controller: UpstreamController) -> UpstreamController:
    log = cluster.workdir / f"{controller.name}.log"
    wait_until(
        lambda: controller.ready() or not cluster.process_alive(controller.name),
        f"{controller.name} {controller.version} /readyz (log: {log})",
        timeout=_READY_SECONDS,
    )
    if not cluster.process_alive(controller.name):
        raise RuntimeError(f"{controller.name} {controller.version} exited at start; see {log}")
    return controller


def _start(cluster: Cluster, name: str, version: str, command: list[str], health_port: int) -> UpstreamController:
    cluster.spawn(name, command)
    return _await_ready(cluster, UpstreamController(name, version, _readyz(health_port)))


def start_jobset(cluster: Cluster) -> UpstreamController:
    """The JobSet controller manager, its configuration file as its chart writes one, but no cert rotation: its
    webhook server serves the control plane's own serving certificate (nothing calls it)."""
    binary = ensure_jobset()
    folder = cluster.workdir / "jobset"
    certs = folder / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cluster.pki.serving_cert, certs / "tls.crt")
    shutil.copyfile(cluster.pki.serving_key, certs / "tls.key")
    health_port = free_port()
    configuration = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": free_port(), "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(configuration))
    kubeconfig = cluster.kubeconfig_for("jobset-controller")
    command = [str(binary), f"--kubeconfig={kubeconfig}", f"--config={folder / 'config.yaml'}"]
    return _start(cluster, "jobset", JOBSET_VERSION, command, health_port)


def start_kuberay(cluster: Cluster) -> UpstreamController:
    """The KubeRay operator (RayCluster, RayJob, RayService), webhooks off as its chart defaults."""
    binary = ensure_kuberay()
    health_port = free_port()
    kubeconfig = cluster.kubeconfig_for("kuberay-operator")
    command = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        "--enable-leader-election=false",
        "--metrics-addr=0",
        f"--health-probe-bind-address=127.0.0.1:{health_port}",
        "--log-stdout-encoder=console",
    ]
    return _start(cluster, "kuberay", KUBERAY_VERSION, command, health_port)


def start_training_operator(cluster: Cluster) -> UpstreamController:
    """Kubeflow's training-operator with the schemes of :data:`TRAINING_OPERATOR_KINDS`. Its certificate rotator
    always runs: it fills the Secret its manifests create empty in the ``kubeflow`` namespace, then waits for the
    kubelet to mount that Secret at a path it does not let one change; here the Secret's pair is written there, as
    the mount would."""
    binary = ensure_training_operator()
    cluster.kubectl("create", "namespace", "kubeflow", check=False)
    cluster.kubectl("create", "secret", "generic", TRAINING_OPERATOR_SECRET, "-n", "kubeflow", check=False)
    health_port = free_port()
    kubeconfig = cluster.kubeconfig_for("training-operator")
    command = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        *(f"--enable-scheme={kind}" for kind in TRAINING_OPERATOR_KINDS),
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{health_port}",
        f"--webhook-server-port={free_port()}",
    ]
    name = "training-operator"
    cluster.spawn(name, command)
    pair = wait_until(
        functools.partial(_filled_secret, cluster), f"{name} to fill Secret kubeflow/{TRAINING_OPERATOR_SECRET}"
    )
    CONTROLLER_RUNTIME_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key, value in pair.items():
        (CONTROLLER_RUNTIME_CERT_DIR / key).write_bytes(base64.b64decode(value))
    return _await_ready(cluster, UpstreamController(name, TRAINING_OPERATOR_VERSION, _readyz(health_port)))


def _filled_secret(cluster: Cluster) -> dict[str, str] | None:
    secret = json.loads(
        cluster.kubectl("get", "secret", TRAINING_OPERATOR_SECRET, "-n", "kubeflow", "-o", "json").stdout
    )
    data: dict[str, str] = secret.get("data") or {}
    return data if data.get("tls.crt") and data.get("tls.key") else None


# The mpi-operator's health port is fixed in its code; nothing in the test session uses it otherwise.
_MPI_OPERATOR_HEALTH_PORT = 8080
_MPI_OPERATOR_LOCK_NAMESPACE = "mpi-operator"


def start_mpi_operator(cluster: Cluster) -> UpstreamController:
    """Kubeflow's mpi-operator (MPIJob v2beta1), as its manifests run it. Its leader election cannot be turned off:
    its Lease lives in a namespace of its own, and it starts its controller once it holds it."""
    binary = ensure_mpi_operator()
    cluster.kubectl("create", "namespace", _MPI_OPERATOR_LOCK_NAMESPACE, check=False)
    kubeconfig = cluster.kubeconfig_for("mpi-operator")
    name = "mpi-operator"
    # It takes KUBECONFIG over its --kubeConfig flag, so the variable is what names its identity.
    command = [str(binary), f"--lock-namespace={_MPI_OPERATOR_LOCK_NAMESPACE}"]
    cluster.spawn(name, command, env=dict(os.environ, KUBECONFIG=str(kubeconfig)))
    log = cluster.workdir / f"{name}.log"
    wait_until(
        lambda: _lease_held(cluster, name) or not cluster.process_alive(name),
        f"{name} {MPI_OPERATOR_VERSION} to hold its Lease (log: {log})",
        timeout=_READY_SECONDS,
    )
    return _await_ready(
        cluster, UpstreamController(name, MPI_OPERATOR_VERSION, f"http://127.0.0.1:{_MPI_OPERATOR_HEALTH_PORT}/healthz")
    )


def _lease_held(cluster: Cluster, name: str) -> bool:
    answer = cluster.kubectl("get", "lease", name, "-n", _MPI_OPERATOR_LOCK_NAMESPACE, "-o", "json", check=False)
    return answer.returncode == 0 and bool(json.loads(answer.stdout)["spec"].get("holderIdentity"))


def _fill_controller_runtime_cert_dir(cluster: Cluster) -> None:
    """Put the control plane's serving pair in controller-runtime's default folder for a webhook server nothing
    calls; a pair already there (the training-operator's) serves as well."""
    CONTROLLER_RUNTIME_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for source, target in ((cluster.pki.serving_cert, "tls.crt"), (cluster.pki.serving_key, "tls.key")):
        if not (CONTROLLER_RUNTIME_CERT_DIR / target).exists():
            shutil.copyfile(source, CONTROLLER_RUNTIME_CERT_DIR / target)


def start_trainer(cluster: Cluster) -> UpstreamController:
    """Kubeflow Trainer v2's controller manager (TrainJob, its runtimes; it runs a JobSet per TrainJob), its
    configuration file as its manifests write one but without cert management: its webhook server serves the control
    plane's serving certificate from controller-runtime's default folder, which it does not let one change (nothing
    calls it)."""
    binary = ensure_trainer()
    folder = cluster.workdir / "trainer"
    folder.mkdir(parents=True, exist_ok=True)
    _fill_controller_runtime_cert_dir(cluster)
    health_port = free_port()
    configuration = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": free_port()},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(configuration))
    kubeconfig = cluster.kubeconfig_for("trainer-controller")
    command = [str(binary), f"--kubeconfig={kubeconfig}", f"--config={folder / 'config.yaml'}"]
    return _start(cluster, "trainer", TRAINER_VERSION, command, health_port)


_APPWRAPPER_NAMESPACE = "appwrapper-system"


def start_appwrapper(cluster: Cluster) -> UpstreamController:
    """The AppWrapper controller, its configuration in the ConfigMap it reads from its namespace: webhooks off
    (nothing calls them), metrics off, its health probe on a free loopback port. Its readiness check starts its
    webhook server all the same (on port 9443, fixed in its code), which then needs a pair in controller-runtime's
    default folder: without one it exits at start."""
    binary = ensure_appwrapper()
    _fill_controller_runtime_cert_dir(cluster)
    cluster.kubectl("create", "namespace", _APPWRAPPER_NAMESPACE, check=False)
    health_port = free_port()
    configuration = {
        "webhooksEnabled": False,
        "controllerManager": {
            "metrics": {"bindAddress": "0"},
            "health": {"bindAddress": f"127.0.0.1:{health_port}"},
            "leaderElection": False,
        },
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "appwrapper-operator-config", "namespace": _APPWRAPPER_NAMESPACE},
        "data": {"config.yaml": yaml.safe_dump(configuration)},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(config_map))
    kubeconfig = cluster.kubeconfig_for("appwrapper-controller")
    command = [str(binary), f"--kubeconfig={kubeconfig}"]
    cluster.spawn("appwrapper", command, env=dict(os.environ, NAMESPACE=_APPWRAPPER_NAMESPACE))
    controller = UpstreamController("appwrapper", APPWRAPPER_VERSION, _readyz(health_port))
    return _await_ready(cluster, controller)


LWS_WEBHOOKS = "lws-webhooks"  # the name of both of its webhook configurations, as the test registers them


def start_lws(cluster: Cluster) -> UpstreamController:
    """The LeaderWorkerSet controller manager with its webhook server on loopback, serving the control plane's own
    serving certificate (no cert rotation), and its webhooks registered against the API server by URL, as its
    manifests register them by Service: LeaderWorkerSets mutated and validated, and the pods of LeaderWorkerSets
    (labelled with their set's name) mutated: that webhook writes their group and worker indices."""
    binary = ensure_lws()
    folder = cluster.workdir / "lws"
    certs = folder / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cluster.pki.serving_cert, certs / "tls.crt")
    shutil.copyfile(cluster.pki.serving_key, certs / "tls.key")
    health_port, webhook_port = free_port(), free_port()
    configuration = {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(configuration))
    kubeconfig = cluster.kubeconfig_for("lws-controller")
    command = [str(binary), f"--kubeconfig={kubeconfig}", f"--config={folder / 'config.yaml'}"]
    controller = _start(cluster, "lws", LWS_VERSION, command, health_port)
    ca_bundle = base64.b64encode(cluster.pki.ca_cert.read_bytes()).decode()

    def webhook(name: str, path: str, group: str, resource: str, operations: list[str]) -> dict[str, object]:
        rule = {"apiGroups": [group], "apiVersions": ["v1"], "operations": operations, "resources": [resource]}
        hook: dict[str, object] = {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}{path}", "caBundle": ca_bundle},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "rules": [rule],
        }
        if resource == "pods":  # only the pods of LeaderWorkerSets: the rest of the suite never waits on it
            selector = {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}
            hook["objectSelector"] = {"matchExpressions": [selector]}
        return hook

    lws_rule = ("leaderworkerset.x-k8s.io", "leaderworkersets", ["CREATE", "UPDATE"])
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": LWS_WEBHOOKS},
        "webhooks": [
            webhook("mleaderworkerset.kb.io", "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", *lws_rule),
            webhook("mpod.kb.io", "/mutate--v1-pod", "", "pods", ["CREATE"]),
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": LWS_WEBHOOKS},
        "webhooks": [
            webhook("vleaderworkerset.kb.io", "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset", *lws_rule)
        ],
    }
    listing = {"apiVersion": "v1", "kind": "List", "items": [mutating, validating]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(listing))
    return controller


def stop_lws(cluster: Cluster) -> None:
    """Unregister the LeaderWorkerSet webhooks (failurePolicy Fail: nothing may call them once it is gone), then
    end its process."""
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        cluster.kubectl("delete", kind, LWS_WEBHOOKS, "--ignore-not-found")
    cluster.end("lws")
