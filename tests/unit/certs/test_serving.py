"""The live TLS context: TLS 1.2+, hot reload without restart, cert-manager directories, ``kuota certs``."""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kuota.certs.authority import CertificateBundle, ServingIdentity, issue_bundle
from kuota.certs.commands import CERTS
from kuota.certs.errors import CertificateMaterialError
from kuota.certs.rotation import DirectoryCertificates
from kuota.certs.serving_context import ReloadableServerContext
from kuota.cli import build_parser

IDENTITY = ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",))


def _client_context(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


async def _handshake(port: int, client: ssl.SSLContext) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1")
    try:
        return await asyncio.wait_for(reader.readexactly(2), timeout=5)
    finally:
        writer.close()
        await writer.wait_closed()


async def _serve(context: ReloadableServerContext) -> tuple[asyncio.Server, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        del reader
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context.context)
    return server, server.sockets[0].getsockname()[1]


async def test_reload_serves_the_new_certificate_without_restarting_the_listener() -> None:
    first = issue_bundle(IDENTITY, datetime.now(UTC))
    second = issue_bundle(IDENTITY, datetime.now(UTC))
    context = ReloadableServerContext()
    context.load(first.cert_pem, first.key_pem)
    server, port = await _serve(context)
    async with server:
        assert await _handshake(port, _client_context(first.ca_cert_pem)) == b"ok"
        context.load(second.cert_pem, second.key_pem)
        assert await _handshake(port, _client_context(second.ca_cert_pem)) == b"ok"
        with pytest.raises(ssl.SSLCertVerificationError):
            await _handshake(port, _client_context(first.ca_cert_pem))


async def test_tls_1_2_clients_are_served_and_nothing_older_is_offered() -> None:
    bundle = issue_bundle(IDENTITY, datetime.now(UTC))
    context = ReloadableServerContext()
    context.load(bundle.cert_pem, bundle.key_pem)
    server, port = await _serve(context)
    client = _client_context(bundle.ca_cert_pem)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    async with server:
        assert await _handshake(port, client) == b"ok"
    # The local OpenSSL may refuse TLS 1.1 on its own; the server must not depend on that.
    assert context.context.minimum_version is ssl.TLSVersion.TLSv1_2


def test_a_mismatched_pair_leaves_the_previous_certificate_in_service() -> None:
    good = issue_bundle(IDENTITY, datetime.now(UTC))
    other = issue_bundle(IDENTITY, datetime.now(UTC))
    context = ReloadableServerContext()
    context.load(good.cert_pem, good.key_pem)
    with pytest.raises(CertificateMaterialError):
        context.load(good.cert_pem, other.key_pem)
    assert context.cert_pem == good.cert_pem


def _write(directory: Path, bundle: CertificateBundle) -> None:
    (directory / "tls.crt").write_bytes(bundle.cert_pem)
    (directory / "tls.key").write_bytes(bundle.key_pem)


def test_cert_dir_is_loaded_and_reloaded_only_when_the_files_change(tmp_path: Path) -> None:
    source = DirectoryCertificates(tmp_path, ReloadableServerContext())
    first = issue_bundle(IDENTITY, datetime.now(UTC))
    _write(tmp_path, first)
    assert source.reload_if_changed()
    assert not source.reload_if_changed()
    second = issue_bundle(IDENTITY, datetime.now(UTC))
    _write(tmp_path, second)
    assert source.reload_if_changed()
    assert source.context.cert_pem == second.cert_pem


def test_missing_cert_dir_files_say_where_to_mount_them(tmp_path: Path) -> None:
    source = DirectoryCertificates(tmp_path, ReloadableServerContext())
    with pytest.raises(CertificateMaterialError, match="--cert-dir"):
        source.reload_if_changed()


async def test_cert_dir_source_signals_ready_after_the_first_load(tmp_path: Path) -> None:
    _write(tmp_path, issue_bundle(IDENTITY, datetime.now(UTC)))
    ready = asyncio.Event()
    source = DirectoryCertificates(tmp_path, ReloadableServerContext(), poll_interval=0.05)
    task = asyncio.create_task(source.run(ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=5)
    finally:
        task.cancel()
    assert source.context.loaded


def test_kuota_certs_writes_a_usable_pair_and_a_private_key_only_the_owner_reads(tmp_path: Path) -> None:
    args = build_parser().parse_args(["certs", "--ip", "127.0.0.1", "--out", str(tmp_path / "tls")])
    assert CERTS.run(args) == 0
    out = tmp_path / "tls"
    assert sorted(path.name for path in out.iterdir()) == ["ca-bundle.b64", "ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert (out / "tls.key").stat().st_mode & 0o777 == 0o600
    context = ReloadableServerContext()
    context.load((out / "tls.crt").read_bytes(), (out / "tls.key").read_bytes())


def test_kuota_certs_refuses_a_bad_ip(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["certs", "--ip", "300.1.1.1"])
    assert CERTS.run(args) == 2
    assert "300.1.1.1" in capsys.readouterr().err
