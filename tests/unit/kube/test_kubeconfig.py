"""Credentials from a kubeconfig or the pod's service account: what is read, and what is refused and why."""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.errors import ConfigurationError
from kuota.kube.credentials import in_cluster
from kuota.kube.kubeconfig import from_kubeconfig
from tests.cluster.pki import ControlPlanePki
from tests.unit.kube.conftest import b64, write_kubeconfig

INSECURE = {"server": "https://10.0.0.1:6443/", "insecure-skip-tls-verify": True}


def test_a_token_kubeconfig_gives_the_server_without_a_trailing_slash_and_a_bearer_header(tmp_path: Path) -> None:
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"token": "s3cret"}))
    assert access.server == "https://10.0.0.1:6443"
    assert access.headers == {"Authorization": "Bearer s3cret"}
    assert access.token_file is None


def test_a_token_file_is_read_relative_to_the_kubeconfig_and_kept_for_rereading(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"tokenFile": "token"}))
    assert access.headers == {"Authorization": "Bearer from-file"}
    assert access.token_file == tmp_path / "token"


def test_an_inline_token_wins_over_a_token_file(tmp_path: Path) -> None:
    access = from_kubeconfig(
        write_kubeconfig(tmp_path / "config", INSECURE, {"token": "inline", "tokenFile": "missing"})
    )
    assert access.headers == {"Authorization": "Bearer inline"}
    assert access.token_file is None


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {}))
    assert access.ssl_context.verify_mode == ssl.CERT_NONE
    assert access.ssl_context.check_hostname is False
    assert access.headers == {}


def test_a_given_ca_replaces_the_system_roots(tmp_path: Path, pki: ControlPlanePki) -> None:
    cluster = {"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(pki.ca_cert)}
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", cluster, {}))
    assert access.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert [dict(entry[0] for entry in ca["subject"]) for ca in access.ssl_context.get_ca_certs()] == [
        {"commonName": "kuota-test-ca"}
    ]


def test_a_tls_server_name_is_kept_for_the_handshake(tmp_path: Path) -> None:
    cluster = {**INSECURE, "tls-server-name": "kubernetes.default.svc"}
    assert from_kubeconfig(write_kubeconfig(tmp_path / "config", cluster, {})).tls_server_name == (
        "kubernetes.default.svc"
    )


@pytest.mark.parametrize(
    ("key", "value", "what"),
    [
        ("auth-provider", {"name": "oidc"}, "an auth-provider plugin"),
        ("username", "admin", "basic auth"),
    ],
)
def test_auth_provider_and_basic_auth_users_are_refused_naming_the_user_entry(
    tmp_path: Path, key: str, value: Any, what: str
) -> None:
    path = write_kubeconfig(tmp_path / "config", INSECURE, {key: value})
    expected = f"kubeconfig {path}: user 'u' authenticates with {what} ({key}), which kuota does not support"
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        from_kubeconfig(path)


def _broken(tmp_path: Path, pki: ControlPlanePki, case: str) -> Path:
    """A kubeconfig with one thing wrong, named by ``case``."""
    path = tmp_path / "config"
    good_cluster = {"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(pki.ca_cert)}
    if case == "not a mapping":
        path.write_text("- just\n- a list\n")
        return path
    if case == "no current-context":
        path.write_text(yaml.safe_dump({"clusters": []}))
        return path
    if case == "context without a cluster":
        path.write_text(yaml.safe_dump({"current-context": "x", "contexts": [{"name": "x"}]}))
        return path
    clusters: dict[str, dict[str, Any]] = {
        "missing server": {"certificate-authority-data": b64(pki.ca_cert)},
        "server without scheme": {"server": "127.0.0.1:6443"},
        "socks proxy": {**good_cluster, "proxy-url": "socks5://user:secret@proxy:1080"},
        "proxy without a host": {**good_cluster, "proxy-url": "http://:3128"},
        "ca not base64": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "***"},
        "ca file missing": {"server": "https://127.0.0.1:6443", "certificate-authority": "nowhere/ca.crt"},
        "ca not pem": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "bm90IGEgY2VydA=="},
        "insecure not a boolean": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": "yes"},
    }
    users: dict[str, dict[str, Any]] = {
        "certificate without key": {"client-certificate-data": b64(pki.admin_cert)},
        "key of another certificate": {
            "client-certificate-data": b64(pki.admin_cert),
            "client-key-data": b64(pki.serving_key),
        },
        "token file missing": {"tokenFile": "no-such-token"},
    }
    return write_kubeconfig(path, clusters.get(case, good_cluster), users.get(case, {}))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("not a mapping", "is not a YAML mapping"),
        ("no current-context", "has no current-context; choose one with 'kubectl --kubeconfig"),
        ("context without a cluster", "context 'x' names no cluster; set its cluster"),
        ("missing server", "cluster 'c' server is None; set it to the API server's https:// URL"),
        ("server without scheme", "cluster 'c' server is '127.0.0.1:6443'"),
        ("socks proxy", "cluster 'c' proxy-url is a socks5:// proxy, which kuota does not support; use an http://"),
        ("proxy without a host", "cluster 'c' proxy-url is not an http:// or https:// URL with a host; fix it"),
        ("ca not base64", "cluster 'c' certificate-authority-data is not base64"),
        ("ca file missing", "cluster 'c' certificate-authority {dir}/nowhere/ca.crt cannot be read"),
        ("ca not pem", "cluster 'c' certificate-authority is not a PEM certificate"),
        ("insecure not a boolean", "cluster 'c' insecure-skip-tls-verify is not true or false"),
        ("certificate without key", "user 'u' has a client certificate or a client key but not both"),
        ("key of another certificate", "user 'u': the client certificate and key do not load"),
        ("token file missing", "user 'u' tokenFile {dir}/no-such-token cannot be read"),
    ],
)
def test_a_broken_kubeconfig_is_a_configuration_error_naming_the_file_and_entry(
    tmp_path: Path, pki: ControlPlanePki, case: str, message: str
) -> None:
    path = _broken(tmp_path, pki, case)
    with pytest.raises(ConfigurationError) as raised:
        from_kubeconfig(path)
    assert str(raised.value).startswith(f"kubeconfig {path}")
    assert message.format(dir=tmp_path) in str(raised.value)


def test_a_kubeconfig_naming_a_missing_context_says_which(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no context named 'other'; set current-context to one of its"):
        from_kubeconfig(write_kubeconfig(tmp_path / "config", INSECURE, {"token": "t"}, current="other"))


def test_a_context_naming_a_missing_user_says_which(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", INSECURE, {})
    document = yaml.safe_load(path.read_text())
    document["contexts"][0]["context"]["user"] = "ghost"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigurationError, match="no user named 'ghost'; add it, or fix the context's user"):
        from_kubeconfig(path)


def test_an_unreadable_kubeconfig_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(f"kubeconfig {tmp_path / 'absent'} cannot be read")):
        from_kubeconfig(tmp_path / "absent")


def test_outside_a_pod_the_error_says_to_pass_a_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigurationError, match=r"KUBERNETES_SERVICE_HOST is unset.*pass --kubeconfig"):
        in_cluster()


def test_in_a_pod_the_service_account_gives_server_ca_and_a_rereadable_token(
    tmp_path: Path, pki: ControlPlanePki, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ca.crt").write_bytes(pki.ca_cert.read_bytes())
    (tmp_path / "token").write_text("sa-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    access = in_cluster(tmp_path)
    assert access.server == "https://[fd00::1]:6443"
    assert access.headers == {"Authorization": "Bearer sa-token"}
    assert access.token_file == tmp_path / "token"
    assert len(access.ssl_context.get_ca_certs()) == 1


def test_in_a_pod_without_a_mounted_token_the_error_says_to_mount_it(
    tmp_path: Path, pki: ControlPlanePki, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ca.crt").write_bytes(pki.ca_cert.read_bytes())
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    with pytest.raises(ConfigurationError, match=r"service account token .* cannot be read .*automountServiceAccount"):
        in_cluster(tmp_path)
