"""Build the control-plane binaries from the Go module proxy, cached by version outside the repo.

Kubernetes cannot be ``go install``-ed (its go.mod replaces the staging modules with local folders), so
each component is built from a small wrapper module that pins the published staging modules instead.
Binaries land in ``$KUOTA_CACHE/bin/<component>-<version>/`` (default ``~/.cache/kuota``); a warm
cache makes :func:`ensure_binaries` a few ``stat`` calls. Nothing built here is ever committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
HELM_VERSION = "v4.3.1"
# Kueue is the baseline of benchmarks/kueue_side_by_side.py; never a test dependency of kuota itself.
KUEUE_VERSION = "v0.17.0"
KUEUE_MODULE = "sigs.k8s.io/kueue"
# An open-loop HTTP load generator in Go, so the webhook benchmark measures the server, not a Python client.
VEGETA_VERSION = "v12.13.0"
VEGETA_MODULE = "github.com/tsenart/vegeta/v12"
# The upstream controllers of the job kinds kuota admits (issue 18), at the versions Kueue v0.17's go.mod
# requires, so kuota and Kueue are compared against the same CRDs.
JOBSET_VERSION = "v0.11.1"
JOBSET_MODULE = "sigs.k8s.io/jobset"
KUBERAY_VERSION = "v1.6.0"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
TRAINING_OPERATOR_VERSION = "v1.9.3"
TRAINING_OPERATOR_MODULE = "github.com/kubeflow/training-operator"
MPI_OPERATOR_VERSION = "v0.8.0"
MPI_OPERATOR_MODULE = "github.com/kubeflow/mpi-operator"
TRAINER_VERSION = "v2.2.0"
TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
APPWRAPPER_VERSION = "v1.2.0"
APPWRAPPER_MODULE = "github.com/project-codeflare/appwrapper"
LWS_VERSION = "v0.8.0"
LWS_MODULE = "sigs.k8s.io/lws"

# The ProvisioningRequest API at the version Kueue v0.20's go.mod requires: its CRD
# (config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml) is installed by the ProvisioningRequest tests.
AUTOSCALER_APIS_MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
AUTOSCALER_APIS_VERSION = "v0.0.0-20240830133931-adfbe7e45277"

# The `k8s.io/<name> v0.0.0` requirements of k8s.io/kubernetes v1.36's go.mod.
STAGING_MODULES = [
    "api",
    "apiextensions-apiserver",
    "apimachinery",
    "apiserver",
    "cli-runtime",
    "client-go",
    "cloud-provider",
    "cluster-bootstrap",
    "code-generator",
    "component-base",
    "component-helpers",
    "controller-manager",
    "cri-api",
    "cri-client",
    "cri-streaming",
    "csi-translation-lib",
    "dynamic-resource-allocation",
    "endpointslice",
    "externaljwt",
    "kms",
    "kube-aggregator",
    "kube-controller-manager",
    "kube-proxy",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "metrics",
    "mount-utils",
    "pod-security-admission",
    "sample-apiserver",
    "sample-cli-plugin",
    "sample-controller",
    "streaming",
]

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def cache_root() -> Path:
    return Path(os.environ.get("KUOTA_CACHE", Path.home() / ".cache" / "kuota"))


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    helm: Path


def _staging_version(kubernetes_version: str) -> str:
    major_minor_patch = kubernetes_version.removeprefix("v").split(".")
    return f"v0.{major_minor_patch[1]}.{major_minor_patch[2]}"


def _version_ldflags(version: str) -> str:
    _, minor, _ = version.removeprefix("v").split(".")
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor=1",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _run(command: list[str], cwd: Path, label: str, extra_env: dict[str, str] | None = None) -> None:
    """Run a go command, echoing one progress line per compiled package (go build -v)."""
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false", **(extra_env or {}))
    started = time.monotonic()
    print(f"[build] {label}: {' '.join(command)}", flush=True)
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    tail: list[str] = []
    for packages, line in enumerate(process.stdout, start=1):
        tail = [*tail[-29:], line.rstrip()]
        if packages % 100 == 0:
            elapsed = time.monotonic() - started
            print(f"[build] {label}: {packages} steps, {elapsed:.0f}s ({line.strip()})", flush=True)
    if process.wait() != 0:
        detail = "\n".join(tail)
        raise RuntimeError(f"{label} failed in {cwd}: {' '.join(command)}\n{detail}")
    print(f"[build] {label}: done in {time.monotonic() - started:.0f}s", flush=True)


@contextlib.contextmanager
def _one_builder(target: Path) -> Iterator[None]:
    """Hold ``target``'s build for this process alone: two processes building the same binary (``make
    control-plane`` and a test that needs helm, say) would share its ``.partial`` folder, one deleting what the
    other builds, and leave a folder with binaries missing. Whoever waits here finds the folder built."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _write_module(folder: Path, go_mod: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "go.mod").exists() or (folder / "go.mod").read_text() != go_mod:
        (folder / "go.mod").write_text(go_mod)
        (folder / "go.sum").unlink(missing_ok=True)


def _build_kubernetes(target: Path) -> None:
    module = cache_root() / "modules" / f"kubernetes-{KUBERNETES_VERSION}"
    staging = _staging_version(KUBERNETES_VERSION)
    replaces = "\n".join(f"\tk8s.io/{name} => k8s.io/{name} {staging}" for name in STAGING_MODULES)
    _write_module(
        module,
        f"module kuota.invalid/kubernetes\n\ngo 1.26.0\n\ngodebug default=go1.26\n\nreplace (\n{replaces}\n)\n",
    )
    packages = [f"k8s.io/kubernetes/cmd/{command}" for command in KUBERNETES_COMMANDS]
    if not (module / "go.sum").exists():
        _run(["go", "get", "-tool", *[f"{p}@{KUBERNETES_VERSION}" for p in packages]], module, "kubernetes deps")
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ldflags = _version_ldflags(KUBERNETES_VERSION)
    _run(["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), *packages], module, "kubernetes")
    tmp.rename(target)


def _build_etcd(target: Path) -> None:
    module = cache_root() / "modules" / f"etcd-{ETCD_VERSION}"
    _write_module(module, "module kuota.invalid/etcd\n\ngo 1.26.0\n")
    package = "go.etcd.io/etcd/server/v3"
    if not (module / "go.sum").exists():
        _run(["go", "get", "-tool", f"{package}@{ETCD_VERSION}"], module, "etcd deps")
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _run(["go", "build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp / "etcd"), package], module, "etcd")
    tmp.rename(target)


def _build_helm(target: Path) -> None:
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env_bin = dict(os.environ, GOBIN=str(tmp))
    started = time.monotonic()
    print(f"[build] helm {HELM_VERSION}: go install", flush=True)
    subprocess.run(
        ["go", "install", "-trimpath", "-ldflags", "-s -w", f"helm.sh/helm/v4/cmd/helm@{HELM_VERSION}"],
        env=dict(env_bin, CGO_ENABLED="0"),
        check=True,
    )
    print(f"[build] helm: done in {time.monotonic() - started:.0f}s", flush=True)
    tmp.rename(target)


def _build_kueue(target: Path) -> None:
    # Kueue's go.mod has no replace directives, so `go install` works; stamp the version as its Makefile does.
    ldflags = f"-s -w -X {KUEUE_MODULE}/pkg/version.GitVersion={KUEUE_VERSION}"
    _go_install(target, f"{KUEUE_MODULE}/cmd/kueue@{KUEUE_VERSION}", f"kueue {KUEUE_VERSION}", ldflags)


def _go_install(target: Path, package: str, label: str, ldflags: str = "-s -w") -> None:
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)  # also makes the cache root, the command's working folder
    command = ["go", "install", "-v", "-trimpath", "-ldflags", ldflags, package]
    _run(command, cache_root(), label, extra_env={"GOBIN": str(tmp)})
    tmp.rename(target)


def ensure_vegeta() -> Path:
    """Return the cached vegeta binary, building it when missing (about a minute when cold)."""
    folder = cache_root() / "bin" / f"vegeta-{VEGETA_VERSION}"
    with _one_builder(folder):
        if not folder.is_dir():
            _go_install(folder, f"{VEGETA_MODULE}@{VEGETA_VERSION}", f"vegeta {VEGETA_VERSION}")
    return folder / "vegeta"


def kueue_module_dir() -> Path:
    """Kueue's module source in the Go module cache (its CRDs and webhook manifests), downloading if absent."""
    cache_root().mkdir(parents=True, exist_ok=True)
    command = ["go", "mod", "download", "-json", f"{KUEUE_MODULE}@{KUEUE_VERSION}"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cache_root())
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (is the Go module proxy reachable?):\n{result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def ensure_kueue() -> Path:
    """Return the cached Kueue manager binary, building it when missing (about ten minutes when cold)."""
    folder = cache_root() / "bin" / f"kueue-{KUEUE_VERSION}"
    with _one_builder(folder):
        if not folder.is_dir():
            _build_kueue(folder)
    return folder / "kueue"


def _build_kueuectl(target: Path) -> None:
    # Kueue's kubectl plugin, from the same module and version as its manager; named as Kueue ships it, so
    # kubectl finds it on PATH as `kubectl kueue`.
    ldflags = f"-s -w -X {KUEUE_MODULE}/pkg/version.GitVersion={KUEUE_VERSION}"
    _go_install(target, f"{KUEUE_MODULE}/cmd/kueuectl@{KUEUE_VERSION}", f"kueuectl {KUEUE_VERSION}", ldflags)
    (target / "kueuectl").rename(target / "kubectl-kueue")


def ensure_kueuectl() -> Path:
    """Return the cached ``kubectl-kueue`` (Kueue's kueuectl), building it when missing (minutes when cold)."""
    folder = cache_root() / "bin" / f"kueuectl-{KUEUE_VERSION}"
    binary = folder / "kubectl-kueue"
    with _one_builder(folder):
        if not binary.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build cut short between the install and the rename
            _build_kueuectl(folder)
    return binary


def module_dir(module: str, version: str) -> Path:
    """A module's source in the Go module cache (its CRDs under config/ or manifests/), downloading if absent."""
    cache_root().mkdir(parents=True, exist_ok=True)
    command = ["go", "mod", "download", "-json", f"{module}@{version}"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cache_root())
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (is the Go module proxy reachable?):\n{result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def _ensure_go_binary(name: str, version: str, package: str, built_name: str) -> Path:
    folder = cache_root() / "bin" / f"{name}-{version}"
    binary = folder / name
    with _one_builder(folder):
        if not binary.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build cut short between the install and the rename
            _go_install(folder, f"{package}@{version}", f"{name} {version}")
            (folder / built_name).rename(binary)
    return binary


def _ensure_wrapped_binary(name: str, version: str, package: str) -> Path:
    """Build ``package@version`` from a wrapper module, as etcd is: ``go install pkg@version``
    asks the proxy for the module's version list (to report deprecations), which the proxy refuses for some
    modules (sigs.k8s.io/jobset, github.com/kubeflow/mpi-operator)."""
    folder = cache_root() / "bin" / f"{name}-{version}"
    with _one_builder(folder):
        if not folder.is_dir():
            module = cache_root() / "modules" / f"{name}-{version}"
            _write_module(module, f"module kuota.invalid/{name}\n\ngo 1.26.0\n")
            if not (module / "go.sum").exists():
                _run(["go", "get", "-tool", f"{package}@{version}"], module, f"{name} deps")
            tmp = folder.with_name(folder.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            command = ["go", "build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp / name), package]
            _run(command, module, f"{name} {version}")
            tmp.rename(folder)
    return folder / name


def ensure_jobset() -> Path:
    """Return the cached JobSet controller manager, building it when missing (minutes when cold)."""
    return _ensure_wrapped_binary("jobset", JOBSET_VERSION, JOBSET_MODULE)


def ensure_lws() -> Path:
    """Return the cached LeaderWorkerSet controller manager, building it when missing (minutes when cold)."""
    return _ensure_wrapped_binary("lws", LWS_VERSION, f"{LWS_MODULE}/cmd")


def ensure_kuberay() -> Path:
    """Return the cached KubeRay operator (RayJob, RayCluster), building it when missing (minutes when cold)."""
    return _ensure_go_binary("kuberay", KUBERAY_VERSION, KUBERAY_MODULE, "ray-operator")


def ensure_training_operator() -> Path:
    """Return the cached Kubeflow training-operator (PyTorchJob), building it when missing (minutes when cold)."""
    package = f"{TRAINING_OPERATOR_MODULE}/cmd/training-operator.v1"
    return _ensure_go_binary("training-operator", TRAINING_OPERATOR_VERSION, package, "training-operator.v1")


def ensure_mpi_operator() -> Path:
    """Return the cached Kubeflow mpi-operator (MPIJob v2beta1), building it when missing (minutes when cold)."""
    package = f"{MPI_OPERATOR_MODULE}/cmd/mpi-operator"
    return _ensure_wrapped_binary("mpi-operator", MPI_OPERATOR_VERSION, package)


def ensure_trainer() -> Path:
    """Return the cached Kubeflow Trainer v2 controller manager (TrainJob), building it when missing (minutes
    when cold)."""
    package = f"{TRAINER_MODULE}/cmd/trainer-controller-manager"
    return _ensure_wrapped_binary("trainer", TRAINER_VERSION, package)


def ensure_appwrapper() -> Path:
    """Return the cached AppWrapper controller, building it when missing (minutes when cold)."""
    return _ensure_wrapped_binary("appwrapper", APPWRAPPER_VERSION, f"{APPWRAPPER_MODULE}/cmd")


def ensure_binaries() -> Binaries:
    """Return the cached binaries, building whichever are missing (tens of minutes when cold)."""
    bin_root = cache_root() / "bin"
    kubernetes = bin_root / f"kubernetes-{KUBERNETES_VERSION}"
    etcd = bin_root / f"etcd-{ETCD_VERSION}"
    helm = bin_root / f"helm-{HELM_VERSION}"
    for folder, build in ((etcd, _build_etcd), (helm, _build_helm), (kubernetes, _build_kubernetes)):
        with _one_builder(folder):
            if not folder.is_dir():
                build(folder)
    return Binaries(
        kube_apiserver=kubernetes / "kube-apiserver",
        kube_controller_manager=kubernetes / "kube-controller-manager",
        kube_scheduler=kubernetes / "kube-scheduler",
        kubectl=kubernetes / "kubectl",
        etcd=etcd / "etcd",
        helm=helm / "helm",
    )
