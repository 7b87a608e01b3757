"""Exec credential plugins (client.authentication.k8s.io v1 and v1beta1): what the kubeconfig may say, what the
plugin is given, how its credential is cached and renewed, and what is refused and why. The plugin is a real
script (tests/fakes/exec_plugin.py); the API server a small stand-in."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kuota.errors import ConfigurationError
from kuota.kube.client import KubeApi
from kuota.kube.errors import CredentialPluginError
from kuota.kube.exec_plugin import REFRESH_BEFORE_EXPIRY_S, ExecConfig, ExecPlugin
from kuota.kube.kubeconfig import from_kubeconfig
from tests.cluster.pki import ControlPlanePki
from tests.fakes.exec_plugin import FakePlugin, credential
from tests.unit.kube.conftest import ServerFactory, b64, server_context, write_kubeconfig
from tests.waiting import async_wait_until

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
INSECURE = {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}


@pytest.fixture
def plugin(tmp_path: Path) -> FakePlugin:
    return FakePlugin.install(tmp_path / "plugin")


def _token_server(accepted: set[str]) -> dict[tuple[str, str], Any]:
    async def whoami(request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if token not in accepted:
            return web.json_response({"kind": "Status", "code": 401, "message": "Unauthorized"}, status=401)
        return web.json_response({"token": token})

    return {("GET", "/whoami"): whoami}


async def test_the_plugins_token_is_sent_and_it_gets_its_args_env_and_exec_info(
    serve: ServerFactory, plugin: FakePlugin, tmp_path: Path
) -> None:
    plugin.answer(credential(V1, token="from-plugin"))
    url = await serve(_token_server({"from-plugin"}))
    exec_entry = plugin.exec_entry(
        V1, args=["eks", "get-token", "--cluster-name", "gpu"], env=[{"name": "PLUGIN_GREETING", "value": "hi"}]
    )
    path = write_kubeconfig(tmp_path / "config", {"server": url}, {"exec": exec_entry})
    async with KubeApi.from_kubeconfig(path) as api:
        assert (await api.request("GET", "/whoami")).object() == {"token": "from-plugin"}
    [call] = plugin.calls()
    assert call["args"] == ["eks", "get-token", "--cluster-name", "gpu"]
    assert call["greeting"] == "hi"
    assert call["stdin"] == ""
    assert call["exec_info"] == {"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": False}}


async def test_provide_cluster_info_tells_the_plugin_the_cluster_and_its_exec_extension(
    plugin: FakePlugin, pki: ControlPlanePki, tmp_path: Path
) -> None:
    plugin.answer(credential(V1BETA1, token="t"))
    cluster = {
        "server": "https://10.0.0.2:6443/",
        "certificate-authority-data": b64(pki.ca_cert),
        "tls-server-name": "kubernetes.default.svc",
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "kuota"}},
            {"name": "other", "extension": {"ignored": True}},
        ],
    }
    exec_entry = plugin.exec_entry(V1BETA1, provideClusterInfo=True)
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", cluster, {"exec": exec_entry}))
    assert access.exec_plugin is not None
    await access.exec_plugin.credential()
    assert plugin.calls()[0]["exec_info"] == {
        "apiVersion": V1BETA1,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://10.0.0.2:6443/",
                "tls-server-name": "kubernetes.default.svc",
                "certificate-authority-data": b64(pki.ca_cert),
                "config": {"audience": "kuota"},
            },
        },
    }


async def test_concurrent_requests_run_the_plugin_once_and_it_is_not_run_while_the_credential_is_fresh(
    serve: ServerFactory, plugin: FakePlugin, tmp_path: Path
) -> None:
    plugin.answer(credential(V1, token="t", expires_at=time.time() + 3600))
    url = await serve(_token_server({"t"}))
    path = write_kubeconfig(tmp_path / "config", {"server": url}, {"exec": plugin.exec_entry(V1)})
    async with KubeApi.from_kubeconfig(path) as api:
        answers = await asyncio.gather(*(api.request("GET", "/whoami") for _ in range(8)))
        assert {answer.status for answer in answers} == {200}
        async with api.with_own_pool(2) as other:  # another pool of the same kubeconfig shares the credential
            assert (await other.request("GET", "/whoami")).ok
    assert len(plugin.calls()) == 1


async def test_a_credential_is_renewed_shortly_before_its_expiry_and_one_without_expiry_is_kept(
    plugin: FakePlugin, tmp_path: Path
) -> None:
    expiry = 1_900_000_000.0
    now = [expiry - 3600]
    config = ExecConfig.parse(plugin.exec_entry(V1), "kubeconfig k: user 'u'", tmp_path, {})
    cached = ExecPlugin(
        config, lambda certificate, key, where: pytest.fail("no certificate expected"), clock=lambda: now[0]
    )
    plugin.answer(credential(V1, token="first", expires_at=expiry), credential(V1, token="second"))
    assert (await cached.credential()).token == "first"
    now[0] = expiry - REFRESH_BEFORE_EXPIRY_S - 1
    assert (await cached.credential()).token == "first"
    assert len(plugin.calls()) == 1
    now[0] = expiry - REFRESH_BEFORE_EXPIRY_S + 1
    assert (await cached.credential()).token == "second"
    now[0] = expiry + 10 * 365 * 86400  # no expirationTimestamp: kept until the server refuses it
    assert (await cached.credential()).token == "second"
    assert len(plugin.calls()) == 2


async def test_a_refused_credential_runs_the_plugin_again_and_the_request_is_sent_once_more(
    serve: ServerFactory, plugin: FakePlugin, tmp_path: Path
) -> None:
    plugin.answer(credential(V1, token="revoked"), credential(V1, token="renewed"))
    url = await serve(_token_server({"renewed"}))
    path = write_kubeconfig(tmp_path / "config", {"server": url}, {"exec": plugin.exec_entry(V1)})
    async with KubeApi.from_kubeconfig(path) as api:
        assert (await api.request("GET", "/whoami")).object() == {"token": "renewed"}
        assert (await api.request("GET", "/whoami")).ok
    assert len(plugin.calls()) == 2


async def test_a_server_that_refuses_every_credential_gets_one_retry_per_request_then_its_401(
    serve: ServerFactory, plugin: FakePlugin, tmp_path: Path
) -> None:
    plugin.answer(credential(V1, token="never-good"))
    url = await serve(_token_server(set()))
    path = write_kubeconfig(tmp_path / "config", {"server": url}, {"exec": plugin.exec_entry(V1)})
    async with KubeApi.from_kubeconfig(path) as api:
        assert (await api.request("GET", "/whoami")).status == 401
    assert len(plugin.calls()) == 2


async def test_a_client_certificate_from_a_v1beta1_plugin_authenticates_over_tls(
    serve: ServerFactory, plugin: FakePlugin, pki: ControlPlanePki, tmp_path: Path
) -> None:
    async def whoami(request: web.Request) -> web.Response:
        assert request.transport is not None
        subject = dict(entry[0] for entry in request.transport.get_extra_info("peercert")["subject"])
        return web.json_response({"user": subject["commonName"]})

    url = await serve({("GET", "/whoami"): whoami}, ssl_context=server_context(pki, client_ca=pki.ca_cert))
    pair = {"certificate": pki.admin_cert.read_text(), "key": pki.admin_key.read_text()}
    plugin.answer(credential(V1BETA1, **pair))
    cluster = {"server": url, "certificate-authority-data": b64(pki.ca_cert)}
    # v1beta1 without interactiveMode means IfAvailable: with no terminal, the plugin runs non-interactively.
    path = write_kubeconfig(tmp_path / "config", cluster, {"exec": plugin.exec_entry(V1BETA1)})
    async with KubeApi.from_kubeconfig(path) as api:
        assert (await api.request("GET", "/whoami")).object() == {"user": "kuota-test-admin"}
    assert plugin.calls()[0]["exec_info"]["spec"] == {"interactive": False}


def test_a_token_or_certificate_beside_an_exec_plugin_is_used_instead_as_in_client_go(
    plugin: FakePlugin, tmp_path: Path
) -> None:
    access = from_kubeconfig(
        write_kubeconfig(tmp_path / "config", INSECURE, {"token": "static", "exec": plugin.exec_entry(V1)})
    )
    assert (access.exec_plugin, access.headers) == (None, {"Authorization": "Bearer static"})


def test_a_command_with_a_folder_is_relative_to_the_kubeconfig_and_a_bare_name_is_looked_up_in_path(
    tmp_path: Path,
) -> None:
    for command, expected in (("bin/plugin", str(tmp_path / "bin/plugin")), ("aws", "aws"), ("/opt/p", "/opt/p")):
        entry = {"apiVersion": V1, "command": command, "interactiveMode": "Never"}
        assert ExecConfig.parse(entry, "here", tmp_path, {}).command == expected


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"apiVersion": V1, "command": "kubelogin", "interactiveMode": "Always"},
            "exec plugin kubelogin needs a terminal (interactiveMode: Always) and kuota has none; sign in",
        ),
        (
            {"apiVersion": V1, "command": "aws"},
            f"exec sets no interactiveMode, which {V1} requires; set interactiveMode: Never",
        ),
        (
            {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "aws"},
            "exec apiVersion is 'client.authentication.k8s.io/v1alpha1', which kuota does not speak; use",
        ),
        ({"apiVersion": V1, "interactiveMode": "Never"}, "exec has no command; set exec.command"),
        ({"apiVersion": V1, "command": "aws", "interactiveMode": "Sometimes"}, "exec interactiveMode is 'Sometimes'"),
        ({"apiVersion": V1BETA1, "command": "aws", "args": "get-token"}, "exec args is not a list of strings"),
        ({"apiVersion": V1BETA1, "command": "aws", "env": [{"name": "A"}]}, "exec env is not a list of {name, value}"),
        ({"apiVersion": V1BETA1, "command": "aws", "provideClusterInfo": "yes"}, "provideClusterInfo is not true"),
    ],
)
def test_an_exec_entry_kuota_cannot_run_is_refused_in_one_line_naming_the_file_and_user(
    tmp_path: Path, entry: dict[str, Any], message: str
) -> None:
    path = write_kubeconfig(tmp_path / "config", INSECURE, {"exec": entry})
    with pytest.raises(ConfigurationError) as raised:
        from_kubeconfig(path)
    assert str(raised.value).startswith(f"kubeconfig {path}: user 'u' ")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


async def test_a_missing_plugin_prints_its_install_hint(tmp_path: Path) -> None:
    hint = "Install gke-gcloud-auth-plugin for use with kubectl by following\n  https://cloud.google.com/..."
    entry = {"apiVersion": V1BETA1, "command": "gke-gcloud-auth-plugin-absent", "installHint": hint}
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"exec": entry}))
    assert access.exec_plugin is not None
    expected = (
        "exec plugin gke-gcloud-auth-plugin-absent is not found; Install gke-gcloud-auth-plugin for use with "
        "kubectl by following https://cloud.google.com/..."
    )
    with pytest.raises(CredentialPluginError, match=re.escape(expected)):
        await access.exec_plugin.credential()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"exit": 3, "stderr": "An error occurred (ExpiredToken)\nwhen calling GetCallerIdentity\n"},
            "failed with exit code 3: An error occurred (ExpiredToken) when calling GetCallerIdentity",
        ),
        ({"exit": 1}, "failed with exit code 1 and printed nothing on stderr"),
        ({"stdout": "token: abc"}, "printed no JSON ExecCredential"),
        ({"stdout": '{"kind": "Secret"}'}, "printed JSON that is not an ExecCredential"),
        (credential(V1BETA1, token="t"), f"answered in apiVersion '{V1BETA1}', not the configured {V1}"),
        ({"stdout": f'{{"apiVersion": "{V1}", "kind": "ExecCredential"}}'}, "printed an ExecCredential without"),
        (credential(V1), "printed neither a token nor a client certificate and key"),
        (credential(V1, certificate="PEM"), "printed a client certificate or a client key but not both"),
        (credential(V1, certificate="not", key="pem"), "the client certificate and key do not load"),
    ],
)
async def test_a_failing_or_confused_plugin_is_an_error_saying_what_it_did(
    plugin: FakePlugin, tmp_path: Path, answer: dict[str, Any], message: str
) -> None:
    plugin.answer(answer)
    path = write_kubeconfig(tmp_path / "config", INSECURE, {"exec": plugin.exec_entry(V1)})
    access = from_kubeconfig(path)
    assert access.exec_plugin is not None
    with pytest.raises(CredentialPluginError) as raised:
        await access.exec_plugin.credential()
    assert str(raised.value).startswith(f"kubeconfig {path}: user 'u': exec plugin {plugin.command}")
    assert message in str(raised.value)


async def test_a_bad_expiration_timestamp_is_refused(plugin: FakePlugin, tmp_path: Path) -> None:
    bad = credential(V1, token="t")
    bad["stdout"] = bad["stdout"].replace('"token"', '"expirationTimestamp": "tomorrow", "token"')
    plugin.answer(bad)
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"exec": plugin.exec_entry(V1)}))
    assert access.exec_plugin is not None
    with pytest.raises(CredentialPluginError, match="printed expirationTimestamp 'tomorrow', which is not an RFC 3339"):
        await access.exec_plugin.credential()


async def test_what_a_working_plugin_says_on_stderr_is_passed_on_as_a_warning(
    plugin: FakePlugin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin.answer({**credential(V1, token="t"), "stderr": "Token cached in ~/.kube/cache\n"})
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"exec": plugin.exec_entry(V1)}))
    assert access.exec_plugin is not None
    with caplog.at_level(logging.WARNING, logger="kuota.kube.exec_plugin"):
        assert (await access.exec_plugin.credential()).token == "t"
    assert [record.getMessage() for record in caplog.records] == [
        f"kubeconfig {tmp_path / 'config'}: user 'u': exec plugin {plugin.command} said on stderr: "
        "Token cached in ~/.kube/cache"
    ]


async def test_a_request_given_up_on_while_its_plugin_runs_ends_the_plugin(tmp_path: Path) -> None:
    script = tmp_path / "slow-plugin"
    script.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\nexec sleep 600\n")
    script.chmod(0o755)
    entry = {"apiVersion": V1, "command": str(script), "interactiveMode": "Never"}
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"exec": entry}))
    assert access.exec_plugin is not None
    waiting = asyncio.create_task(access.exec_plugin.credential())
    pid_text = await async_wait_until(lambda: _read(tmp_path / "pid"), "the plugin to start", timeout=30)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pid_text), 0)


def _read(path: Path) -> str | None:
    text = path.read_text().strip() if path.exists() else ""
    return text or None
