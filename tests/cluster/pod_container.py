"""One container of a rendered pod spec run with podman as a kubelet would run it: the chart's image, command,
args (with ``$(VAR)`` expanded), env (field references resolved), volume mounts and securityContext, on the
host's network (the test API server listens on loopback), with the pod's ServiceAccount mounted where a pod
has it. The image tests (``tests/integration/images``) read everything from ``helm template``, so a change
to the chart is what runs here.

Podman runs through ``scripts/images podman`` (its settings and store under ``~/.cache/kuota/containers``).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
IMAGES_SCRIPT = REPO / "scripts" / "images"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class PodContainerError(AssertionError):
    """The container could not be started as the pod spec asks (a kubelet would refuse it too)."""


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(IMAGES_SCRIPT), "podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise PodContainerError(f"podman {' '.join(args[:2])} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def host_address() -> str:
    """This machine's address on its default route (no packet is sent): the API server reaches a process on the
    host's network there, and an EndpointSlice may not name a loopback address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("203.0.113.1", 9))
        address: str = probe.getsockname()[0]
        return address


def image_present(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def image_user(image: str) -> str:
    return podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()


@dataclass(frozen=True)
class PodIdentity:
    """What the downward API and the environment of a pod would say about it."""

    name: str
    namespace: str
    node_name: str
    api_server_host: str
    api_server_port: int


def _field(identity: PodIdentity, path: str) -> str:
    fields = {
        "metadata.name": identity.name,
        "metadata.namespace": identity.namespace,
        "spec.nodeName": identity.node_name,
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    if path not in fields:
        raise PodContainerError(f"fieldRef {path} is not one this stand-in kubelet resolves")
    return fields[path]


def _environment(container: Mapping[str, Any], identity: PodIdentity) -> dict[str, str]:
    env = {
        "KUBERNETES_SERVICE_HOST": identity.api_server_host,
        "KUBERNETES_SERVICE_PORT": str(identity.api_server_port),
    }
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = _expand(variable["value"], env)
        else:
            env[variable["name"]] = _field(identity, variable["valueFrom"]["fieldRef"]["fieldPath"])
    return env


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion; an unknown variable stays as written, as the kubelet leaves it."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda match: env.get(match[1], match[0]), text)


def _run_as(security: Mapping[str, Any], image: str) -> list[str]:
    """``--user`` as the kubelet sets it, refusing root under runAsNonRoot as the kubelet does."""
    user, group = security.get("runAsUser"), security.get("runAsGroup")
    if security.get("runAsNonRoot"):
        effective = str(user) if user is not None else image_user(image).split(":")[0]
        if not effective.isdigit() or int(effective) == 0:
            raise PodContainerError(f"runAsNonRoot: image {image} would run as user {effective or 'root'}")
    if user is None:
        return []
    return ["--user", f"{user}:{group}" if group is not None else str(user)]


def _security_flags(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    security = {**pod_spec.get("securityContext", {}), **container.get("securityContext", {})}
    flags = _run_as(security, container["image"])
    if "fsGroup" in security:
        flags += ["--group-add", str(security["fsGroup"])]
    if security.get("readOnlyRootFilesystem"):
        flags += ["--read-only", "--read-only-tmpfs=false"]
    if security.get("privileged"):
        flags.append("--privileged")
    if security.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    capabilities = security.get("capabilities", {})
    flags += [f"--cap-drop={name.lower()}" for name in capabilities.get("drop", [])]
    flags += [f"--cap-add={name.lower()}" for name in capabilities.get("add", [])]
    return flags


@dataclass
class PodContainer:
    """A started container; ``stop`` removes it."""

    name: str
    address: str  # where its ports answer: 127.0.0.1 on the host's network, else its own address
    ports: dict[str, int]
    readiness: Mapping[str, Any]

    @classmethod
    def start(
        cls,
        pod_spec: Mapping[str, Any],
        container_name: str,
        *,
        identity: PodIdentity,
        workdir: Path,
        volumes: Mapping[str, Path],
        service_account: Path | None,
        runtime_mounts: Mapping[Path, str] | None = None,
        runtime_env: Mapping[str, str] | None = None,
        network: str = "host",
        hosts: Mapping[str, str] | None = None,
    ) -> PodContainer:
        """``volumes``: a host folder for each of the pod's volumes that is not an emptyDir (configMap, secret,
        hostPath, persistentVolumeClaim), by volume name; an emptyDir gets a fresh folder under ``workdir``
        unless one is given for it (to read what the container left there).
        ``service_account``: the folder with token, ca.crt and namespace, or None for a pod without one.
        ``runtime_mounts`` (host path: container path, read-only) and ``runtime_env``: what the node's container
        runtime adds, as the NVIDIA runtime mounts the driver's NVML library.
        ``network``: podman's ``--network``, "host" or "bridge" (a network namespace of its own, as a pod has, so
        two replicas can listen on the same ports); ``hosts``: name: address lines for its /etc/hosts."""
        (container,) = [
            c for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]] if c["name"] == container_name
        ]
        env = _environment(container, identity)
        name = f"kuota-test-{container_name}-{uuid.uuid4().hex[:8]}"
        command = ["run", "--detach", "--name", name, f"--network={network}"]
        for host, address in (hosts or {}).items():
            command.append(f"--add-host={host}:{address}")
        if pod_spec.get("hostPID"):
            command.append("--pid=host")
        command += _security_flags(pod_spec, container)
        for key, value in {**env, **(runtime_env or {})}.items():
            command += ["--env", f"{key}={value}"]
        pod_volumes = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            source = _volume_source(pod_volumes[mount["name"]], volumes, workdir, pod_spec)
            options = ",ro" if mount.get("readOnly") else ""
            command += ["--mount", f"type=bind,source={source},destination={mount['mountPath']}{options}"]
        for host_path, container_path in (runtime_mounts or {}).items():
            command += ["--mount", f"type=bind,source={host_path},destination={container_path},ro"]
        if service_account is not None and pod_spec.get("automountServiceAccountToken", True):
            command += ["--mount", f"type=bind,source={service_account},destination={SERVICE_ACCOUNT_DIR},ro"]
        if "command" in container:
            command += ["--entrypoint", json.dumps([_expand(part, env) for part in container["command"]])]
        command.append(container["image"])
        command += [_expand(arg, env) for arg in container.get("args", [])]
        podman(*command)
        ports = {port["name"]: port["containerPort"] for port in container.get("ports", []) if "name" in port}
        address = "127.0.0.1"
        if network != "host":
            address = podman("inspect", "--format", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        return cls(name=name, address=address, ports=ports, readiness=container.get("readinessProbe", {}))

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def state(self) -> dict[str, Any]:
        """podman's State: Running, ExitCode, ..."""
        state: dict[str, Any] = json.loads(podman("inspect", "--format", "{{json .State}}", self.name).stdout)
        return state

    def exited(self) -> bool:
        return not self.state()["Running"]

    def ready(self) -> bool:
        """The readiness probe as the kubelet runs it: an HTTP GET answered 2xx or 3xx."""
        status, _body = self.readiness_reply()
        return 200 <= status < 400

    def readiness_reply(self) -> tuple[int, str]:
        """The readiness probe's status and body; status 0 when nothing answered."""
        probe = self.readiness["httpGet"]
        port = probe["port"] if isinstance(probe["port"], int) else self.ports[probe["port"]]
        try:
            with urllib.request.urlopen(f"http://{self.address}:{port}{probe['path']}", timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()
        except (urllib.error.URLError, OSError):
            return 0, ""

    def stop(self) -> None:
        podman("rm", "--force", "--time", "5", self.name, check=False)


def _volume_source(
    volume: Mapping[str, Any], given: Mapping[str, Path], workdir: Path, pod_spec: Mapping[str, Any]
) -> Path:
    if volume["name"] in given:
        return given[volume["name"]]
    if "emptyDir" not in volume:
        raise PodContainerError(f"volume {volume['name']} ({sorted(set(volume) - {'name'})}) needs a host folder")
    folder = workdir / f"empty-dir-{volume['name']}-{uuid.uuid4().hex[:6]}"
    folder.mkdir(parents=True)
    # As the kubelet prepares an emptyDir: group-owned by fsGroup and group-writable; world-writable without one.
    fs_group = pod_spec.get("securityContext", {}).get("fsGroup")
    if fs_group is None:
        folder.chmod(0o1777)
    else:
        shutil.chown(folder, group=fs_group)
        folder.chmod(0o2775)
    return folder


def service_account_folder(folder: Path, token: str, ca_cert: Path, namespace: str) -> Path:
    """What the kubelet projects for a pod's ServiceAccount: a TokenRequest's token, the cluster CA, the namespace."""
    folder.mkdir(parents=True)
    (folder / "token").write_text(token)
    shutil.copyfile(ca_cert, folder / "ca.crt")
    (folder / "namespace").write_text(namespace)
    for path in (folder, *folder.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder
