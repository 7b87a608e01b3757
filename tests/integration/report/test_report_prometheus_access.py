"""``kuota report`` reaches a real Prometheus the ways managed ones are secured, and reads the same week.

The generated week is backfilled once; every Prometheus here serves a copy of it. Prometheus itself serves
TLS (a test CA), basic auth (bcrypt) and client-certificate auth from its ``--web.config.file``; it cannot
check bearer tokens, so a tenant gateway in front of a plain one does, with ``X-Scope-OrgID`` as Mimir's.
Each report through them must equal the report read over plain http, and no secret may appear in what the
report prints or writes.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuota.report.errors import PrometheusAccessError
from kuota.report.sources.prometheus_access import prometheus_access
from kuota.report.sources.prometheus_api import PrometheusClient
from tests.integration.report import synthetic_week as week
from tests.integration.report.conftest import ReportRun, run_report
from tests.integration.report.secured_prometheus import TlsFiles, bcrypt_hash, issue_tls_files, tenant_gateway
from tests.prometheus_server import PrometheusServer, WebConfig, backfill_openmetrics

pytestmark = pytest.mark.integration

PASSWORD = "correct-horse-battery-staple"
WRONG_PASSWORD = "tr0ub4dor&3"
TOKENS = ("token-one-ZmlSt", "token-two-c2Vjb25k", "token-three-dGhpcmQ")
TENANT = "team-a"
QUERY = "count(kuota_gpu_allocated)"
WEEK_ARGS = ("--end", str(week.END), "--window", "7d", "--resolution", "5m")


@pytest.fixture(scope="module")
def week_tsdb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The week's blocks, served by no Prometheus: each server below runs on its own copy."""
    workdir = tmp_path_factory.mktemp("access-week")
    history = week.history(week.GpuExporters.KUOTA_AND_DCGM).write_file(workdir / "history.om")
    backfill_openmetrics(history, workdir / "tsdb")
    history.unlink()
    return workdir / "tsdb"


def _start(week_tsdb: Path, workdir: Path, web: WebConfig | None = None) -> PrometheusServer:
    shutil.copytree(week_tsdb, workdir / "tsdb")
    return PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="30s", web=web)


@pytest.fixture(scope="module")
def plain_prometheus(week_tsdb: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with _start(week_tsdb, tmp_path_factory.mktemp("plain")) as server:
        yield server


@pytest.fixture(scope="module")
def plain_report(plain_prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = run_report("--prometheus", plain_prometheus.url, *WEEK_ARGS, out=tmp_path_factory.mktemp("plain-report"))
    assert run.exit_code == 0, run.stderr
    report = run.json()
    assert report["teams"], "the week has teams: the comparisons below compare figures, not two empty reports"
    return report


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return issue_tls_files(tmp_path_factory.mktemp("tls"))


def _tls_server_config(tls: TlsFiles) -> dict[str, str]:
    return {"cert_file": str(tls.server_cert), "key_file": str(tls.server_key)}


def _secret_file(folder: Path, name: str, secret: str) -> Path:
    path = folder / name
    path.write_text(secret + "\n", encoding="utf-8")
    return path


def _assert_nothing_shows(run: ReportRun, *secrets: str) -> None:
    """No secret (nor its basic-auth encoding) in stderr or in any file the report wrote."""
    written = [p.read_text(encoding="utf-8", errors="replace") for p in run.out.glob("*")] if run.out.exists() else []
    for secret in secrets:
        for form in (secret, base64.b64encode(f"kuota:{secret}".encode()).decode()):
            assert form not in run.stderr, "a secret is in the report's messages"
            assert not any(form in text for text in written), "a secret is in the report's files"


def _one_error_line(run: ReportRun) -> str:
    errors = [line for line in run.stderr.splitlines() if line.startswith("kuota report: error:")]
    assert run.exit_code == 3 and len(errors) == 1 and "Traceback" not in run.stderr, run.stderr
    assert not (run.out / "report.json").exists()
    return errors[0]


@pytest.fixture(scope="module")
def basic_auth_prometheus(
    week_tsdb: Path, tls_files: TlsFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    web = WebConfig(
        {"tls_server_config": _tls_server_config(tls_files), "basic_auth_users": {"kuota": bcrypt_hash(PASSWORD)}},
        ssl_context=tls_files.client_context(with_certificate=False),
        headers={"Authorization": "Basic " + base64.b64encode(f"kuota:{PASSWORD}".encode()).decode()},
    )
    with _start(week_tsdb, tmp_path_factory.mktemp("basic-auth"), web) as server:
        yield server


def test_the_report_reads_the_week_over_https_with_a_ca_and_basic_auth(
    basic_auth_prometheus: PrometheusServer, tls_files: TlsFiles, plain_report: dict[str, Any], tmp_path: Path
) -> None:
    assert basic_auth_prometheus.url.startswith("https://")
    run = run_report(
        "--prometheus",
        basic_auth_prometheus.url,
        "--prometheus-ca-file",
        str(tls_files.ca_cert),
        "--prometheus-basic-auth",
        "kuota",
        "--prometheus-password-file",
        str(_secret_file(tmp_path, "password", PASSWORD)),
        *WEEK_ARGS,
        out=tmp_path / "out",
    )
    assert run.exit_code == 0, run.stderr
    assert run.json() == plain_report
    _assert_nothing_shows(run, PASSWORD)


def test_a_wrong_password_is_one_line_naming_the_user_and_the_file_never_the_password(
    basic_auth_prometheus: PrometheusServer, tls_files: TlsFiles, tmp_path: Path
) -> None:
    password_file = _secret_file(tmp_path, "password", WRONG_PASSWORD)
    run = run_report(
        "--prometheus",
        basic_auth_prometheus.url,
        "--prometheus-ca-file",
        str(tls_files.ca_cert),
        "--prometheus-basic-auth",
        "kuota",
        "--prometheus-password-file",
        str(password_file),
        *WEEK_ARGS,
        out=tmp_path / "out",
    )
    line = _one_error_line(run)
    assert f"Prometheus at {basic_auth_prometheus.url} refused basic auth as user 'kuota'" in line
    assert f"--prometheus-password-file {password_file}" in line and "HTTP 401" in line
    _assert_nothing_shows(run, WRONG_PASSWORD, PASSWORD)


def test_without_the_ca_the_server_certificate_is_refused_in_one_line(
    basic_auth_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    run = run_report("--prometheus", basic_auth_prometheus.url, *WEEK_ARGS, out=tmp_path / "out")
    line = _one_error_line(run)
    assert f"the TLS handshake with Prometheus at {basic_auth_prometheus.url} failed" in line
    assert "CERTIFICATE_VERIFY_FAILED" in line and "--prometheus-ca-file" in line


@pytest.fixture(scope="module")
def client_cert_prometheus(
    week_tsdb: Path, tls_files: TlsFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    tls = _tls_server_config(tls_files) | {
        "client_ca_file": str(tls_files.ca_cert),
        "client_auth_type": "RequireAndVerifyClientCert",
    }
    web = WebConfig({"tls_server_config": tls}, ssl_context=tls_files.client_context(with_certificate=True))
    with _start(week_tsdb, tmp_path_factory.mktemp("client-cert"), web) as server:
        yield server


def test_a_client_certificate_the_server_requires_is_presented(
    client_cert_prometheus: PrometheusServer, tls_files: TlsFiles, plain_report: dict[str, Any], tmp_path: Path
) -> None:
    run = run_report(
        "--prometheus",
        client_cert_prometheus.url,
        "--prometheus-ca-file",
        str(tls_files.ca_cert),
        "--prometheus-cert-file",
        str(tls_files.client_cert),
        "--prometheus-key-file",
        str(tls_files.client_key),
        "--prometheus-server-name",
        "localhost",  # the serving certificate names localhost as well as 127.0.0.1
        *WEEK_ARGS,
        out=tmp_path / "out",
    )
    assert run.exit_code == 0, run.stderr
    assert run.json() == plain_report


def test_without_the_client_certificate_the_handshake_is_refused_in_one_line(
    client_cert_prometheus: PrometheusServer, tls_files: TlsFiles, tmp_path: Path
) -> None:
    run = run_report(
        "--prometheus",
        client_cert_prometheus.url,
        "--prometheus-ca-file",
        str(tls_files.ca_cert),
        *WEEK_ARGS,
        out=tmp_path / "out",
    )
    line = _one_error_line(run)
    assert f"the TLS handshake with Prometheus at {client_cert_prometheus.url} failed" in line
    assert "--prometheus-cert-file with --prometheus-key-file" in line


def _rotate(token_file: Path, token: str) -> None:
    """As the kubelet updates a projected token: a new file renamed over the old one."""
    fresh = token_file.with_name(token_file.name + ".new")
    fresh.write_text(token, encoding="utf-8")
    os.replace(fresh, token_file)


def test_a_rotated_bearer_token_file_is_read_again_by_the_running_client(
    plain_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    token_file = _secret_file(tmp_path, "token", TOKENS[0])
    with tenant_gateway(plain_prometheus.url, TENANT, TOKENS[0]) as gateway:
        access = prometheus_access(gateway.url, bearer_token_file=token_file, headers=[f"X-Scope-OrgID: {TENANT}"])

        async def rotate_under_one_client() -> str:
            async with PrometheusClient(plain_prometheus.url, 30) as direct:
                expected = await direct.instant(QUERY, week.END)
            assert expected and expected[0].value > 0
            async with PrometheusClient(gateway.url, 30, access=access) as client:
                assert await client.instant(QUERY, week.END) == expected
                _rotate(token_file, TOKENS[1])
                gateway.accepted_token = TOKENS[1]
                assert await client.instant(QUERY, week.END) == expected
                gateway.accepted_token = TOKENS[2]  # the gateway moved on, the file did not
                with pytest.raises(PrometheusAccessError) as refused:
                    await client.instant(QUERY, week.END)
                return str(refused.value)

        message = asyncio.run(rotate_under_one_client())
    assert gateway.seen() == [TOKENS[0], TOKENS[1], TOKENS[1]]
    assert f"refused the bearer token of --prometheus-bearer-token-file {token_file}" in message
    assert "with header(s) X-Scope-OrgID" in message and "HTTP 401: authentication failed" in message
    assert not any(token in message for token in TOKENS)


def test_the_report_through_a_tenant_gateway_needs_the_token_and_the_org_header(
    plain_prometheus: PrometheusServer, plain_report: dict[str, Any], tmp_path: Path
) -> None:
    token_file = _secret_file(tmp_path, "token", TOKENS[0])
    with tenant_gateway(plain_prometheus.url, TENANT, TOKENS[0]) as gateway:
        base = ("--prometheus", gateway.url, "--prometheus-bearer-token-file", str(token_file), *WEEK_ARGS)
        through = run_report(*base, "--prometheus-header", f"X-Scope-OrgID: {TENANT}", out=tmp_path / "through")
        no_tenant = run_report(*base, out=tmp_path / "no-tenant")
    assert through.exit_code == 0, through.stderr
    assert through.json() == plain_report
    line = _one_error_line(no_tenant)
    assert f"refused the bearer token of --prometheus-bearer-token-file {token_file} (HTTP 401: no org id)" in line
    _assert_nothing_shows(through, TOKENS[0])
    _assert_nothing_shows(no_tenant, TOKENS[0])
