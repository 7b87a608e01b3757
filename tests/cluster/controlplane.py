"""Start and stop a real control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, the pod-lifecycle driver and fake GPU nodes, all in one work folder.

Every process is started in its own session and recorded in ``<workdir>/processes.json``, so
:meth:`Cluster.stop` (and ``python -m tests.cluster down``) can end them all, whoever started them; when a
test session owns the cluster, the children also die with it (``PR_SET_PDEATHSIG``), so an interrupted or
killed run leaves no process and no port behind.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.cluster.binaries import Binaries, ensure_binaries
from tests.cluster.nodes import DEFAULT_POOLS, NodePool
from tests.cluster.pki import FRONT_PROXY_CLIENT, ControlPlanePki, write_client_identity, write_pki

_PR_SET_PDEATHSIG = 1
_READY_DEADLINE_SECONDS = 90.0
_REPO_ROOT = Path(__file__).resolve().parents[2]


class ClusterError(RuntimeError):
    """The control plane could not be started or reached; the message names the process and its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _wait(predicate: Callable[[], bool], what: str, deadline_seconds: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    hint = f"; see {log}" if log else ""
    raise ClusterError(f"timed out after {deadline_seconds:.0f}s waiting for {what}{hint}")


@dataclass
class Cluster:
    """A running control plane. Build one with :meth:`start`; :meth:`attach` finds one left running."""

    workdir: Path
    binaries: Binaries
    server: str
    etcd_url: str
    pki: ControlPlanePki
    pools: tuple[NodePool, ...] = DEFAULT_POOLS
    startup_seconds: float = 0.0
    _pids: dict[str, int] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def node_names(self) -> list[str]:
        return [name for pool in self.pools for name in pool.node_names()]

    # -- lifecycle -------------------------------------------------------------------------------------

    @classmethod
    def start(cls, workdir: Path, pools: Sequence[NodePool] = DEFAULT_POOLS, die_with_parent: bool = True) -> Cluster:
        began = time.monotonic()
        binaries = ensure_binaries()
        workdir.mkdir(parents=True, exist_ok=True)
        pki = write_pki(workdir / "pki")
        apiserver_port = free_port()
        etcd_port, etcd_peer_port = free_port(), free_port()
        cluster = cls(
            workdir=workdir,
            binaries=binaries,
            server=f"https://127.0.0.1:{apiserver_port}",
            etcd_url=f"http://127.0.0.1:{etcd_port}",
            pki=pki,
            pools=tuple(pools),
        )
        try:
            cluster._start_processes(apiserver_port, etcd_peer_port, die_with_parent)
            cluster._create_nodes()
        except BaseException:
            cluster.stop()
            raise
        cluster.startup_seconds = time.monotonic() - began
        return cluster

    @classmethod
    def attach(cls, workdir: Path) -> Cluster:
        state = json.loads((workdir / "processes.json").read_text())
        cluster = cls(
            workdir=workdir,
            binaries=ensure_binaries(),
            server=state["server"],
            etcd_url=state["etcd_url"],
            pki=ControlPlanePki(**{key: Path(value) for key, value in state["pki"].items()}),
            pools=tuple(NodePool(**pool) for pool in state["pools"]),
        )
        cluster._pids = {name: int(pid) for name, pid in state["pids"].items()}
        return cluster

    def stop(self) -> None:
        """End every process of this cluster (SIGTERM, then SIGKILL) and wait until each is gone."""
        for pid in reversed(list(self._pids.values())):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for pid in self._pids.values():
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            _reap(pid)
        self._pids.clear()
        # A listening socket can outlive its process by a moment; callers expect the ports back on return.
        _wait(lambda: not any(map(_listening, (self.server, self.etcd_url))), "ports to close", 15)
        (self.workdir / "processes.json").unlink(missing_ok=True)

    # -- processes -------------------------------------------------------------------------------------

    def _spawn(self, name: str, command: list[str], die_with_parent: bool, env: dict[str, str] | None = None) -> None:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child from here on
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,  # noqa: PLW1509 - only prctl, async-signal-safe
            cwd=self.workdir,
            env=env,
        )
        log.close()
        self._pids[name] = process.pid
        self._save_state()

    def spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        """Start one more process of this cluster (e.g. an upstream job controller), logged to ``<name>.log``;
        :meth:`end` or :meth:`stop` ends it."""
        self._spawn(name, command, die_with_parent=True, env=env)

    def end(self, name: str) -> None:
        """End one process started by :meth:`spawn` (SIGTERM, then SIGKILL) and wait until it is gone."""
        pid = self._pids.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        _reap(pid)
        self._save_state()

    def _save_state(self) -> None:
        state = {
            "server": self.server,
            "etcd_url": self.etcd_url,
            "pki": {key: str(value) for key, value in vars(self.pki).items()},
            "pools": [vars(pool) for pool in self.pools],
            "pids": self._pids,
        }
        (self.workdir / "processes.json").write_text(json.dumps(state, indent=2))

    def _start_processes(self, apiserver_port: int, etcd_peer_port: int, die_with_parent: bool) -> None:
        etcd_data = self.workdir / "etcd"
        self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                f"--data-dir={etcd_data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            die_with_parent,
        )
        _wait(lambda: self._http_ok(f"{self.etcd_url}/health"), "etcd", 30, self.workdir / "etcd.log")
        pki = self.pki
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--secure-port={apiserver_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}/",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
                "--profiling=false",
                # The aggregation layer, for kuota's visibility API: the front proxy's identity and the headers
                # it names users in; APIServices are reached at their Service's endpoints (there is no
                # kube-proxy here to route a ClusterIP).
                f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-uid-headers=X-Remote-Uid",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki.proxy_client_cert}",
                f"--proxy-client-key-file={pki.proxy_client_key}",
                "--enable-aggregator-routing=true",
                "--v=1",
            ],
            die_with_parent,
        )
        self._write_kubeconfig()
        _wait(
            self._apiserver_ready,
            "kube-apiserver /readyz",
            _READY_DEADLINE_SECONDS,
            self.workdir / "kube-apiserver.log",
        )
        kubeconfig = str(self.kubeconfig)
        self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--controllers=job-controller,garbage-collector-controller,namespace-controller,"
                "serviceaccount-controller,serviceaccount-token-controller,ttl-after-finished-controller,"
                "pod-garbage-collector-controller,cronjob-controller,deployment-controller,replicaset-controller,"
                "statefulset-controller",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca_cert}",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--concurrent-job-syncs=20",
                "--v=1",
            ],
            die_with_parent,
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.binaries.kube_scheduler),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--v=1",
            ],
            die_with_parent,
        )
        self._spawn(
            "pod-lifecycle",
            [sys.executable, "-m", "tests.cluster.pod_lifecycle", f"--kubeconfig={kubeconfig}"],
            die_with_parent,
            env=dict(os.environ, PYTHONPATH=str(_REPO_ROOT)),
        )
        # The controller-manager is working once it has made the default ServiceAccount.
        _wait(
            lambda: self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0,
            "kube-controller-manager (default ServiceAccount)",
            _READY_DEADLINE_SECONDS,
            self.workdir / "kube-controller-manager.log",
        )

    def _create_nodes(self) -> None:
        nodes = [pool.node_manifest(name) for pool in self.pools for name in pool.node_names()]
        manifest = yaml.safe_dump_all(nodes)
        self.kubectl("apply", "-f", "-", input=manifest)
        # Status is a subresource: set capacity and Ready explicitly, as a kubelet would. The apiserver taints
        # new nodes not-ready; with no node-lifecycle controller here nothing would lift it, so reset the taints.
        for node in nodes:
            name = node["metadata"]["name"]
            status_patch = json.dumps({"status": node["status"]})
            self.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", status_patch)
            self.kubectl("patch", "node", name, "--type=merge", "-p", json.dumps({"spec": node["spec"]}))

    # -- access ----------------------------------------------------------------------------------------

    def kubeconfig_for(self, user: str, groups: tuple[str, ...] = ("system:masters",)) -> Path:
        """A kubeconfig that authenticates as ``user`` in ``groups`` (a client certificate from the cluster CA)."""
        slug = user.replace(":", "-")
        cert, key = self.workdir / "pki" / f"{slug}.crt", self.workdir / "pki" / f"{slug}.key"
        write_client_identity(self.pki, user, groups, cert, key)
        path = self.workdir / f"{slug}.kubeconfig"
        path.write_text(yaml.safe_dump(self._kubeconfig_document(cert, key)))
        return path

    def kubeconfig_with_token(self, name: str, token: str) -> Path:
        """A kubeconfig that authenticates with a bearer token (e.g. a ServiceAccount's, from TokenRequest)."""
        document = self._kubeconfig_document(self.pki.admin_cert, self.pki.admin_key)
        document["users"] = [{"name": "admin", "user": {"token": token}}]
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(document))
        return path

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(yaml.safe_dump(self._kubeconfig_document(self.pki.admin_cert, self.pki.admin_key)))

    def _kubeconfig_document(self, cert: Path, key: Path) -> dict[str, Any]:
        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kuota-test",
                    "cluster": {"server": self.server, "certificate-authority-data": b64(self.pki.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(cert),
                        "client-key-data": b64(key),
                    },
                }
            ],
            "contexts": [{"name": "kuota-test", "context": {"cluster": "kuota-test", "user": "admin"}}],
            "current-context": "kuota-test",
        }

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def _apiserver_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.server}/readyz", context=self.ssl_context(), timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    @staticmethod
    def _http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
            check=False,
        )
        if check and result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def process_alive(self, name: str) -> bool:
        return name in self._pids and _alive(self._pids[name])


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass  # not our child (attached cluster): fall back to a signal probe
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _listening(url: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        except OSError:
            return True
        return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # not our child: its own parent or init reaps it
        os.waitpid(pid, os.WNOHANG)
