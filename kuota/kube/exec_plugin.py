"""Credentials from a kubeconfig's exec plugin (``users[].user.exec``), as kubectl gets them: how EKS
(``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``) and AKS (``kubelogin``) authenticate.

The plugin speaks ``client.authentication.k8s.io/v1`` or ``v1beta1``: it is run without blocking the event loop,
with the kubeconfig's ``env`` over kuota's environment and ``KUBERNETES_EXEC_INFO`` set as client-go sets it
(``spec.interactive`` false, ``spec.cluster`` with ``provideClusterInfo``), and prints an ExecCredential whose
``status`` holds a bearer token or a client certificate and key. The credential is kept until shortly before
its ``expirationTimestamp`` (for ever without one), and the plugin is run again when the API server answers 401
to it. kuota never has a terminal to give a plugin, so ``interactiveMode: Always`` is refused when the kubeconfig
is read, and ``IfAvailable`` runs non-interactively, as kubectl runs it without a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kuota.kube.errors import CredentialPluginError, KubeconfigError

log = logging.getLogger(__name__)

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
# A credential this close to its expiry is not sent: a request in flight must still carry a valid one.
REFRESH_BEFORE_EXPIRY_S = 10.0
# Long enough for a plugin that waits on a browser sign-in; bounded, so a hung plugin fails instead of kuota.
PLUGIN_TIMEOUT_S = 300.0
# The end of a failing plugin's stderr quoted in the error: where plugins say what went wrong.
STDERR_TAIL_CHARS = 600

# Builds the TLS context for a client certificate and key (PEM) the plugin printed, naming the plugin in its
# KubeconfigError when they do not load.
ClientTls = Callable[[bytes, bytes, str], ssl.SSLContext]


@dataclass(frozen=True)
class ExecConfig:
    """One kubeconfig user's ``exec`` entry, checked; ``where`` names the file and the user for messages."""

    where: str
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    api_version: str
    install_hint: str | None
    # ``spec.cluster`` of KUBERNETES_EXEC_INFO, when the entry sets provideClusterInfo.
    cluster_info: Mapping[str, Any] | None

    @classmethod
    def parse(cls, body: Any, where: str, folder: Path, cluster_info: Mapping[str, Any]) -> ExecConfig:
        """``body`` of an ``exec`` entry in a kubeconfig in ``folder``; ``cluster_info`` as the plugin would see it."""
        if not isinstance(body, dict):
            raise KubeconfigError(f"{where} exec is not a mapping; fix it")
        api_version = body.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise KubeconfigError(
                f"{where} exec apiVersion is {api_version!r}, which kuota does not speak; "
                f"use {' or '.join(API_VERSIONS)} (a newer plugin release writes one)"
            )
        command = body.get("command")
        if not isinstance(command, str) or not command:
            raise KubeconfigError(f"{where} exec has no command; set exec.command to the plugin to run")
        # As kubectl: a command with a folder in it is relative to the kubeconfig; a bare name is looked up in PATH.
        if os.sep in command and not os.path.isabs(command):
            command = str(folder / command)
        args = body.get("args") or []
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise KubeconfigError(f"{where} exec args is not a list of strings; fix it")
        env = body.get("env") or []
        if not isinstance(env, list) or not all(
            isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)
            for item in env
        ):
            raise KubeconfigError(f"{where} exec env is not a list of {{name, value}} strings; fix it")
        install_hint = body.get("installHint")
        if install_hint is not None and not isinstance(install_hint, str):
            raise KubeconfigError(f"{where} exec installHint is not a string; fix it")
        provide_cluster_info = body.get("provideClusterInfo", False)
        if not isinstance(provide_cluster_info, bool):
            raise KubeconfigError(f"{where} exec provideClusterInfo is not true or false; fix it")
        _check_interactive_mode(body.get("interactiveMode"), api_version, command, where)
        return cls(
            where=where,
            command=command,
            args=tuple(args),
            env=tuple((item["name"], item["value"]) for item in env),
            api_version=api_version,
            install_hint=install_hint or None,
            cluster_info=cluster_info if provide_cluster_info else None,
        )

    def exec_info(self) -> str:
        """KUBERNETES_EXEC_INFO: what the plugin is told about its run."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster_info is not None:
            spec["cluster"] = dict(self.cluster_info)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})


def _check_interactive_mode(mode: Any, api_version: str, command: str, where: str) -> None:
    if mode is None and api_version.endswith("/v1"):
        # client-go's rule: v1 has no default (v1beta1's is IfAvailable).
        raise KubeconfigError(
            f"{where} exec sets no interactiveMode, which {api_version} requires; set interactiveMode: Never"
        )
    if mode is not None and mode not in INTERACTIVE_MODES:
        raise KubeconfigError(f"{where} exec interactiveMode is {mode!r}; set one of {', '.join(INTERACTIVE_MODES)}")
    if mode == "Always":
        raise KubeconfigError(
            f"{where} exec plugin {command} needs a terminal (interactiveMode: Always) and kuota has none; "
            "sign in with the plugin in a terminal first and set interactiveMode: IfAvailable or Never, "
            "or give the user a token or client certificate"
        )


@dataclass(frozen=True)
class ExecCredential:
    """What the plugin printed: a bearer token, or a client certificate and key (already in a TLS context)."""

    token: str | None
    tls: ssl.SSLContext | None
    expires_at: float | None  # Unix seconds; None: until the API server refuses it


class ExecPlugin:
    """Runs one kubeconfig user's plugin and keeps its credential; one per kubeconfig read, shared by every
    connection pool made from it, so concurrent requests run the plugin once."""

    def __init__(self, config: ExecConfig, client_tls: ClientTls, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._client_tls = client_tls
        self._clock = clock  # wall clock: expirationTimestamp is an absolute time
        self._cached: ExecCredential | None = None
        self._lock = asyncio.Lock()

    async def credential(self) -> ExecCredential:
        """The cached credential while it is not about to expire, else a fresh one from the plugin."""
        cached = self._cached
        if cached is not None and self._fresh(cached):
            return cached
        async with self._lock:  # concurrent requests wait for one run of the plugin
            cached = self._cached
            if cached is None or not self._fresh(cached):
                cached = self._cached = await self._run()
            return cached

    async def refused(self, credential: ExecCredential) -> ExecCredential:
        """The API server answered 401 to ``credential``: run the plugin again, unless another request did."""
        async with self._lock:
            if self._cached is credential or self._cached is None:
                self._cached = await self._run()
            return self._cached

    def _fresh(self, credential: ExecCredential) -> bool:
        return credential.expires_at is None or self._clock() < credential.expires_at - REFRESH_BEFORE_EXPIRY_S

    async def _run(self) -> ExecCredential:
        config = self.config
        environment = {**os.environ, **dict(config.env), "KUBERNETES_EXEC_INFO": config.exec_info()}
        try:
            process = await asyncio.create_subprocess_exec(
                config.command,
                *config.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environment,
            )
        except OSError as error:
            hint = config.install_hint or "install it, or fix exec.command"
            what = "is not found" if isinstance(error, FileNotFoundError) else f"cannot be run ({error.strerror})"
            raise CredentialPluginError(
                f"{config.where}: exec plugin {config.command} {what}; {' '.join(hint.split())}"
            ) from error
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), PLUGIN_TIMEOUT_S)
        except TimeoutError as error:
            raise CredentialPluginError(
                f"{config.where}: exec plugin {config.command} printed no credential in {PLUGIN_TIMEOUT_S:.0f}s; "
                "run it by hand to see what it waits for"
            ) from error
        finally:
            if process.returncode is None:  # timed out or cancelled: the plugin must not outlive its caller
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        tail = _tail(stderr)
        if process.returncode != 0:
            said = f": {tail}" if tail else " and printed nothing on stderr"
            raise CredentialPluginError(
                f"{config.where}: exec plugin {config.command} failed with exit code {process.returncode}{said}"
            )
        if tail:
            log.warning("%s: exec plugin %s said on stderr: %s", config.where, config.command, tail)
        return self._credential(stdout)

    def _credential(self, stdout: bytes) -> ExecCredential:
        where = f"{self.config.where}: exec plugin {self.config.command}"
        try:
            document = json.loads(stdout)
        except ValueError as error:
            raise CredentialPluginError(f"{where} printed no JSON ExecCredential ({error}); run it by hand") from error
        if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
            raise CredentialPluginError(f"{where} printed JSON that is not an ExecCredential; run it by hand")
        if document.get("apiVersion") != self.config.api_version:
            raise CredentialPluginError(
                f"{where} answered in apiVersion {document.get('apiVersion')!r}, not the configured "
                f"{self.config.api_version}; set exec.apiVersion to the one it speaks"
            )
        status = document.get("status")
        if not isinstance(status, dict):
            raise CredentialPluginError(f"{where} printed an ExecCredential without a status")
        token, certificate, key = (
            status.get(name) or None for name in ("token", "clientCertificateData", "clientKeyData")
        )
        if not all(value is None or isinstance(value, str) for value in (token, certificate, key)):
            raise CredentialPluginError(f"{where} printed a status whose token or client data is not a string")
        if (certificate is None) != (key is None):
            raise CredentialPluginError(f"{where} printed a client certificate or a client key but not both")
        if token is None and certificate is None:
            raise CredentialPluginError(f"{where} printed neither a token nor a client certificate and key")
        tls = None
        if certificate is not None and key is not None:
            try:
                tls = self._client_tls(certificate.encode(), key.encode(), where)
            except KubeconfigError as error:
                raise CredentialPluginError(str(error)) from error
        return ExecCredential(token, tls, _expiry(status.get("expirationTimestamp"), where))


def _expiry(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise CredentialPluginError(f"{where} printed expirationTimestamp {value!r}, which is not an RFC 3339 time")
    return moment.timestamp()


def _tail(stderr: bytes) -> str:
    text = " ".join(stderr.decode(errors="replace").split())
    return text if len(text) <= STDERR_TAIL_CHARS else "..." + text[-STDERR_TAIL_CHARS:]
